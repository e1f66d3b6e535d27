// A plan file (`simulate --plan`, `train --plan`, the trace directory's plans/), and its
// "explain" object as the report reads it: what explain_from_json accepts writes back to JSON
// that reads back to the same.
#include "core/json_read.h"
#include "fuzz_common.h"
#include "plan/plan_explain.h"
#include "plan/plan_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  nlohmann::json j;
  try {
    j = json_parse(fuzz::fuzz_text(data, size), "plan.json");
  } catch (const Error&) {
    return 0;
  }
  try {
    const plan::Plan p = plan::plan_from_json(j);
    (void)plan::plan_to_json(p).dump();
  } catch (const Error&) {
  }
  if (!j.is_object() || !j.contains("explain")) return 0;
  nlohmann::json once;
  try {
    once = plan::explain_to_json(plan::explain_from_json(j["explain"], "explain"));
  } catch (const Error&) {
    return 0;
  }
  // Written by explain_to_json: reads back (an Error escapes as a finding) to the same.
  if (plan::explain_to_json(plan::explain_from_json(once, "explain")) != once) std::abort();
  return 0;
}
