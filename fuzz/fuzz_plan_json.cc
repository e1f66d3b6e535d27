// A plan file (`simulate --plan`, `train --plan`, the trace directory's plans/).
#include "core/json_read.h"
#include "fuzz_common.h"
#include "plan/plan_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  try {
    const plan::Plan p = plan::plan_from_json(json_parse(fuzz::fuzz_text(data, size), "plan.json"));
    (void)plan::plan_to_json(p).dump();
  } catch (const Error&) {
  }
  return 0;
}
