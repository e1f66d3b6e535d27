// The YAML configuration file (`--config FILE`), read as the command reads it (a regular file
// within its size bound, core/input_file.h), then the checks every command runs on it.
#include "core/input_file.h"
#include "options/options.h"
#include "fuzz_common.h"
#include "plan/schedule_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  static const std::string path = fuzz::fuzz_scratch_path("config.yaml");
  fuzz::fuzz_write_file(path, data, size);
  Config cfg;
  try {
    const std::string text = input_file_read(path, input_kind::kConfigYaml);
    options::apply_yaml(cfg, text, "fuzz.yaml");
    cfg.validate();
    plan::schedule_check_layout(cfg.parallel);
    (void)cfg.model.params_total();
  } catch (const Error&) {
  }
  return 0;
}
