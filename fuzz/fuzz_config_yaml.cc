// The YAML configuration file (`--config FILE`), then the checks every command runs on it.
#include "options/options.h"
#include "fuzz_common.h"
#include "plan/schedule_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  infinipipe::Config cfg;
  try {
    infinipipe::options::apply_yaml(cfg, infinipipe::fuzz::fuzz_text(data, size), "fuzz.yaml");
    cfg.validate();
    infinipipe::plan::schedule_check_layout(cfg.parallel);
    (void)cfg.model.params_total();
  } catch (const infinipipe::Error&) {
  }
  return 0;
}
