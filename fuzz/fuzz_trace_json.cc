// A trace file of `train --trace DIR` (trace-rankNNNNN.json), as `report` reads it.
#include "core/json_read.h"
#include "fuzz_common.h"
#include "report/run_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  try {
    report::RunTrace trace;
    report::run_trace_parse(json_parse(fuzz::fuzz_text(data, size), "trace-rank00000.json"),
                            "trace-rank00000.json", trace);
  } catch (const Error&) {
  }
  return 0;
}
