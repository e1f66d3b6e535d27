// The 16-bit floating-point formats of Hugging Face checkpoints, to and from fp32 (the CPU
// engine's type). bf16 is the upper half of an fp32, so bf16 -> fp32 is exact and fp32 -> bf16
// rounds to nearest even; every f16 value (subnormals, infinities, NaN) is exact in fp32.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace infinipipe {

float bf16_to_f32(uint16_t bits);
float f16_to_f32(uint16_t bits);
// Round to nearest, ties to even; NaN stays a (quiet) NaN, never rounds to infinity.
uint16_t f32_to_bf16(float value);

// True for the dtypes convert_to_f32 reads: "F32", "BF16", "F16".
bool float_dtype_readable(std::string_view dtype);
// `raw` holds out.size() little-endian elements of `dtype` (one float_dtype_readable accepts).
void convert_to_f32(std::string_view dtype, std::span<const uint8_t> raw, std::span<float> out);

}  // namespace infinipipe
