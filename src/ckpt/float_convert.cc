#include "ckpt/float_convert.h"

#include <bit>
#include <cstring>

#include "core/error.h"

namespace infinipipe {

float bf16_to_f32(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) {  // infinity or NaN (payload kept)
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent != 0) {  // normal: rebias 15 -> 127
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return std::bit_cast<float>(sign);  // signed zero
  // Subnormal: mantissa * 2^-24, normal in fp32 once shifted until its leading one is implicit.
  int32_t e = -14;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  mantissa &= 0x3ffu;
  return std::bit_cast<float>(sign | static_cast<uint32_t>(e + 127) << 23 | (mantissa << 13));
}

uint16_t f32_to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep the sign, force a quiet payload
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

bool float_dtype_readable(std::string_view dtype) {
  return dtype == "F32" || dtype == "BF16" || dtype == "F16";
}

void convert_to_f32(std::string_view dtype, std::span<const uint8_t> raw, std::span<float> out) {
  const size_t elem = dtype == "F32" ? 4 : 2;
  if (!float_dtype_readable(dtype) || raw.size() != out.size() * elem) {
    fail("internal: convert_to_f32 of {} bytes of {} into {} floats", raw.size(), dtype,
         out.size());
  }
  if (dtype == "F32") {
    std::memcpy(out.data(), raw.data(), raw.size());
    return;
  }
  const bool brain = dtype == "BF16";
  for (size_t i = 0; i < out.size(); ++i) {
    const uint16_t bits = static_cast<uint16_t>(raw[2 * i] | (raw[2 * i + 1] << 8));
    out[i] = brain ? bf16_to_f32(bits) : f16_to_f32(bits);
  }
}

}  // namespace infinipipe
