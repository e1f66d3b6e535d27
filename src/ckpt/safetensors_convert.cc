// SafetensorsReader's reads of Hugging Face weights: F32, BF16 or F16 converted to fp32, and a
// tensor's bytes as stored (for exports and tests that compare them).
#include <vector>

#include "ckpt/float_convert.h"
#include "ckpt/safetensors.h"
#include "core/error.h"

namespace infinipipe {

void SafetensorsReader::read_as_f32(const std::string& name, std::span<float> out) const {
  const SafetensorsInfo& t = info(name);
  if (!float_dtype_readable(t.dtype)) {
    fail("{}: tensor {} has dtype {}; infinipipe reads F32, BF16 and F16 weights", path_, name,
         t.dtype);
  }
  if (t.numel() != static_cast<int64_t>(out.size())) {
    fail("{}: tensor {} has {} elements, expected {}", path_, name, t.numel(), out.size());
  }
  if (t.dtype == "F32") {
    read_bytes(t, out.data());
    return;
  }
  std::vector<uint8_t> raw(static_cast<size_t>(t.end - t.begin));
  read_bytes(t, raw.data());
  convert_to_f32(t.dtype, raw, out);
}

std::vector<uint8_t> SafetensorsReader::read_raw(const std::string& name) const {
  const SafetensorsInfo& t = info(name);
  std::vector<uint8_t> raw(static_cast<size_t>(t.end - t.begin));
  read_bytes(t, raw.data());
  return raw;
}

}  // namespace infinipipe
