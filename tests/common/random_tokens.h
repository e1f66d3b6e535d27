// Random token sequences for the tests: one per length, tokens uniform in [0, max_token], from a
// seeded generator, so every run of a test (and every rank of a distributed one) sees the same.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace infinipipe::testing {

inline std::vector<std::vector<int32_t>> random_tokens(const std::vector<int64_t>& lengths,
                                                       int32_t max_token, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, max_token);
  std::vector<std::vector<int32_t>> out;
  for (int64_t n : lengths) {
    std::vector<int32_t> s(static_cast<size_t>(n));
    for (auto& t : s) t = tok(rng);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace infinipipe::testing
