// Summary of a length distribution: share of sequences and of tokens per length bucket, and
// percentiles. Used by `infinipipe data stats` and by reports of workloads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace infinipipe::data {

struct LengthBucket {
  std::string label;  // "<=1K", "1K-2K", ..., ">=64K"
  int64_t lo = 0;     // lengths in [lo, hi] belong to the bucket
  int64_t hi = 0;
  int64_t sequences = 0;
  int64_t tokens = 0;
  double sequence_share = 0.0;  // of all sequences, in [0, 1]
  double token_share = 0.0;     // of all tokens, in [0, 1]
};

struct LengthStats {
  int64_t count = 0;
  int64_t total_tokens = 0;
  double mean = 0.0;
  int64_t min = 0;
  int64_t p50 = 0;  // nearest-rank percentiles
  int64_t p90 = 0;
  int64_t p99 = 0;
  int64_t max = 0;
  // <=1K, (1K,2K], (2K,4K], (4K,8K], (8K,16K], (16K,32K], (32K,64K), >=64K (1K = 1024 tokens).
  std::vector<LengthBucket> buckets;
};

// Throws Error if a length is negative. An empty input gives zero counts and shares.
LengthStats length_stats(std::span<const int64_t> lengths);

// Markdown: a table of the buckets, then a line of percentiles.
std::string format_length_stats(const LengthStats& stats);

}  // namespace infinipipe::data
