// Workloads: the lengths of the sequences of a dataset, from a Megatron indexed dataset, a text
// file, or a built-in synthetic distribution. A sequence is one document truncated to the
// maximum length (docs/architecture.md, vocabulary).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/length_stats.h"

namespace infinipipe::data {

// One positive length per line; blank lines and '#' comments (whole line or trailing) are
// skipped. Throws Error naming the file and line on anything else, or if there is no length.
std::vector<int64_t> lengths_from_text(const std::string& path);

// One entry per document of the Megatron dataset PREFIX.bin/.idx, in document order: the sum
// of the lengths of the sequences the document spans, truncated to seq_length. An empty
// document gives 0, so that entry i is always document i.
std::vector<int64_t> lengths_from_indexed(const std::string& prefix, int64_t seq_length);

// Names of the built-in distributions, for help texts and error messages.
inline constexpr const char* kLengthDistributions[] = {"github", "commoncrawl", "uniform", "fixed"};

// `count` lengths in [1, seq_length] drawn from a named distribution with a seed (same seed,
// same lengths, on every platform):
//   fixed        every length = seq_length
//   uniform      U[1, seq_length]
//   github       lognormal body (median 1280, sigma 1.05) + 3% Pareto tail (x_m 16K, alpha 1.1)
//   commoncrawl  lognormal body (median 768, sigma 1.0) + 1.2% Pareto tail (x_m 16K, alpha 0.9)
// Lengths above seq_length are truncated to it, so with seq_length below 64K the long tail
// collapses onto seq_length (docs/data.md lists the shares each setting produces).
// Throws ConfigError for an unknown name or a non-positive count or seq_length.
std::vector<int64_t> lengths_synthetic(const std::string& distribution, int64_t count,
                                       int64_t seq_length, uint64_t seed);

}  // namespace infinipipe::data
