// exp for the attention inner loops. libm's expf does not vectorise, and GCC will not
// if-convert the range clamp of a scalar version without -fno-trapping-math, so the bulk goes
// through GCC/Clang vector extensions (lowered to AVX-512 or AVX2 as -march allows).
#pragma once

#include <cstdint>
#include <cstring>

namespace infinipipe {

namespace fast_math_detail {

// One native vector register: 16 lanes with AVX-512, 8 with AVX, else 4 (SSE).
#if defined(__AVX512F__)
inline constexpr int kLanes = 16;
#elif defined(__AVX__)
inline constexpr int kLanes = 8;
#else
inline constexpr int kLanes = 4;
#endif
typedef float vecf __attribute__((vector_size(kLanes * 4)));
typedef int32_t veci __attribute__((vector_size(kLanes * 4)));

// exp(x) = 2^n · exp(r), n = round(x / ln2), |r| ≤ ln2 / 2; Cephes' polynomial for exp(r).
// Max relative error ≈ 2e-7; inputs below −87 give ≈ 0 and above 88 saturate.
template <typename F, typename I>
inline F exp_poly(F x) {
  const F lo = F{} - 87.0f, hi = F{} + 88.0f;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const float kRound = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  F t = x * 1.44269504088896341f + kRound;
  F fn = t - kRound;
  F r = x - fn * 0.693359375f;
  r = r + fn * 2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  I n;
  std::memcpy(&n, &t, sizeof(n));  // the low mantissa bits of t hold n + 2^22
  I bits = (n - 0x4B400000 + 127) << 23;
  F scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

}  // namespace fast_math_detail

inline float fast_expf(float x) {
  using namespace fast_math_detail;
  vecf v = vecf{} + x;
  return exp_poly<vecf, veci>(v)[0];
}

// x[c] = exp(x[c] − shift) for c < n; returns Σ x[c] (summed in a fixed order).
inline float exp_shifted(float* x, int64_t n, float shift) {
  using namespace fast_math_detail;
  vecf acc{};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    vecf v;
    std::memcpy(&v, x + c, sizeof(v));
    v = exp_poly<vecf, veci>(v - shift);
    std::memcpy(x + c, &v, sizeof(v));
    acc += v;
  }
  if (c < n) {  // tail: padded lanes are masked out of the sum
    vecf v{};
    std::memcpy(&v, x + c, sizeof(float) * static_cast<size_t>(n - c));
    v = exp_poly<vecf, veci>(v - shift);
    std::memcpy(x + c, &v, sizeof(float) * static_cast<size_t>(n - c));
    vecf mask{};
    for (int64_t i = 0; i < n - c; ++i) mask[i] = 1.0f;
    acc += v * mask;
  }
  float sum = 0.0f;
  for (int i = 0; i < kLanes; ++i) sum += acc[i];
  return sum;
}

// out[c] = exp(−x[c]) for c < n.
inline void exp_neg(float* out, const float* x, int64_t n) {
  using namespace fast_math_detail;
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes) {
    vecf v;
    std::memcpy(&v, x + c, sizeof(v));
    v = exp_poly<vecf, veci>(-v);
    std::memcpy(out + c, &v, sizeof(v));
  }
  for (; c < n; ++c) out[c] = fast_expf(-x[c]);
}

}  // namespace infinipipe
