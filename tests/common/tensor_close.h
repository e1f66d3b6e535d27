// A tensor against its reference by relative L2 distance, ‖got − want‖ / ‖want‖ in double: the
// measure of "the same maths to fp32 round-off" the runtime and distributed tests share.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <span>

namespace infinipipe::testing {

// Passes when both have the same size, the reference is not all zero (a missing gradient must not
// pass) and the relative L2 distance is at most tol.
inline ::testing::AssertionResult tensor_close(std::span<const float> got,
                                               std::span<const float> want, double tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << got.size() << " values against " << want.size();
  }
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  if (!(norm > 0)) return ::testing::AssertionFailure() << "the reference is all zero";
  const double rel = std::sqrt(diff / norm);
  if (!(rel <= tol)) {
    return ::testing::AssertionFailure() << "relative L2 distance " << rel << " > " << tol;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace infinipipe::testing
