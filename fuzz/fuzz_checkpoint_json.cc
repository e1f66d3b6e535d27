// A checkpoint's JSON files: the same input read as state.json, as a safetensors index and as
// the Hugging Face config.json (one reader for infinipipe's own and a Hugging Face folder's).
#include "ckpt/checkpoint_state.h"
#include "ckpt/hf_config.h"
#include "core/json_read.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  nlohmann::json j;
  try {
    j = json_parse(fuzz::fuzz_text(data, size), "fuzz.json");
  } catch (const Error&) {
    return 0;
  }
  CheckpointState state;
  try {
    state = checkpoint_state_from_json(j, "state.json");
  } catch (const Error&) {
    state.files = {{"model.safetensors", {"00000000", 8}}};
  }
  try {
    (void)checkpoint_index_from_json(j, "model.safetensors.index.json", state.files);
  } catch (const Error&) {
  }
  try {
    (void)hf_config_to_model(j, "config.json");
  } catch (const Error&) {
  }
  return 0;
}
