// A Hugging Face model folder (`train --load HF_FOLDER`): config.json, a NUL byte, then
// model.safetensors. The folder is opened as train opens it, and the tensors its config.json
// does not describe are listed and refused (issue 33). Each file is first checked against its
// size bound, as the readers check them.
#include <filesystem>
#include <string>

#include "ckpt/hf_folder.h"
#include "core/input_file.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  static const std::string dir = fuzz::fuzz_scratch_path("hf");
  std::filesystem::create_directories(dir);
  const std::string text = fuzz::fuzz_text(data, size);
  const size_t cut = text.find('\0');
  const std::string config = text.substr(0, cut);
  const std::string weights = cut == std::string::npos ? std::string() : text.substr(cut + 1);
  fuzz::fuzz_write_file(dir + "/config.json", config.data(), config.size());
  fuzz::fuzz_write_file(dir + "/model.safetensors", weights.data(), weights.size());
  try {
    (void)input_file_read(dir + "/config.json", input_kind::kJson, InputLinks::refuse);
    HfModelReader reader(dir);
    (void)reader.unexpected_tensors();
    reader.refuse_unexpected_tensors();
    (void)reader.param_names();
  } catch (const Error&) {
  }
  return 0;
}
