// A calibration file (`--calibration`), then the cost model built from it.
#include "cost/calibration.h"
#include "cost/cost_model.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  try {
    const cost::Calibration c =
        cost::calibration_from_json(fuzz::fuzz_text(data, size), "calibration.json");
    const cost::CostModel m(c.model, c.device, c.coeffs, c.ulysses_degree, c.bf16);
    const cost::SliceShape slice{0, c.model.seq_length, true};
    (void)m.forward_time({&slice, 1}, {c.model.num_layers, true, true});
  } catch (const Error&) {
  }
  return 0;
}
