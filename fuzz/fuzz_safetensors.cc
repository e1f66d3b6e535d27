// A safetensors file: the header (JSON with shapes and offsets) and then every tensor read.
#include "ckpt/safetensors.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace infinipipe;
  static const std::string path = fuzz::fuzz_scratch_path("tensors.safetensors");
  fuzz::fuzz_write_file(path, data, size);
  try {
    const SafetensorsReader r(path);
    for (const SafetensorsInfo& t : r.tensors()) {
      if (t.numel() > (1 << 20)) continue;  // the header check already vouched for the bytes
      if (t.dtype == "F32") (void)r.read_f32(t.name);
      if (t.dtype == "I64") (void)r.read_i64(t.name);
    }
  } catch (const Error&) {
  }
  return 0;
}
