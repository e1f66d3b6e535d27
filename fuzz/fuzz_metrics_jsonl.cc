// The JSON-lines metrics file of a run (metrics.jsonl), as `report` reads it.
#include "fuzz_common.h"
#include "report/run_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  try {
    (void)report::run_metrics_parse(fuzz::fuzz_text(data, size), "metrics.jsonl");
  } catch (const Error&) {
  }
  return 0;
}
