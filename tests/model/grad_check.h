// Helpers of the model tests: random data and finite differences of double-precision references.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace infinipipe::testing {

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Central difference of f with respect to x[i] (x is restored).
inline double fd_grad(const std::function<double()>& f, std::vector<double>& x, size_t i,
                      double h = 1e-5) {
  const double keep = x[i];
  x[i] = keep + h;
  const double fp = f();
  x[i] = keep - h;
  const double fm = f();
  x[i] = keep;
  return (fp - fm) / (2 * h);
}

// Checks analytic grads against finite differences of a double reference at `samples` indices
// spread over the tensor (all when samples ≥ size). Tolerance is relative to the largest grad.
inline void expect_grad_matches(const char* what, const std::vector<float>& analytic,
                                std::vector<double>& x, const std::function<double()>& f,
                                double rtol = 2e-4, size_t samples = 1u << 30) {
  ASSERT_EQ(analytic.size(), x.size()) << what;
  double scale = 1e-12;
  for (float g : analytic) scale = std::max(scale, std::abs(static_cast<double>(g)));
  const size_t n = x.size();
  const size_t step = samples >= n ? 1 : n / samples;
  int failures = 0;
  for (size_t i = 0; i < n; i += step) {
    const double num = fd_grad(f, x, i);
    if (std::abs(num - analytic[i]) > rtol * scale && failures++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << " vs numeric " << num
                    << " (largest grad " << scale << ")";
    }
  }
}

// ‖a − b‖ / ‖b‖
inline double rel_diff(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

}  // namespace infinipipe::testing
