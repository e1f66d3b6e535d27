#include "data/length_stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"

namespace infinipipe::data {

namespace {

// Nearest-rank percentile of sorted values.
int64_t percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto n = static_cast<int64_t>(sorted.size());
  int64_t rank = static_cast<int64_t>(std::ceil(p / 100.0 * static_cast<double>(n)));
  rank = std::clamp<int64_t>(rank, 1, n);
  return sorted[static_cast<size_t>(rank - 1)];
}

std::vector<LengthBucket> empty_buckets() {
  constexpr int64_t K = 1024;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return {
      {"<=1K", 0, K},
      {"1K-2K", K + 1, 2 * K},
      {"2K-4K", 2 * K + 1, 4 * K},
      {"4K-8K", 4 * K + 1, 8 * K},
      {"8K-16K", 8 * K + 1, 16 * K},
      {"16K-32K", 16 * K + 1, 32 * K},
      {"32K-64K", 32 * K + 1, 64 * K - 1},  // ">=64K" starts at 64K exactly
      {">=64K", 64 * K, kMax},
  };
}

}  // namespace

LengthStats length_stats(std::span<const int64_t> lengths) {
  LengthStats st;
  st.buckets = empty_buckets();
  std::vector<int64_t> sorted(lengths.begin(), lengths.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0) fail("sequence {} has negative length {}", i, sorted[i]);
  }
  std::sort(sorted.begin(), sorted.end());
  st.count = static_cast<int64_t>(sorted.size());
  for (const int64_t len : sorted) {
    st.total_tokens += len;
    for (auto& b : st.buckets) {
      if (len >= b.lo && len <= b.hi) {
        b.sequences += 1;
        b.tokens += len;
        break;
      }
    }
  }
  if (st.count == 0) return st;
  st.mean = static_cast<double>(st.total_tokens) / static_cast<double>(st.count);
  st.min = sorted.front();
  st.max = sorted.back();
  st.p50 = percentile(sorted, 50);
  st.p90 = percentile(sorted, 90);
  st.p99 = percentile(sorted, 99);
  for (auto& b : st.buckets) {
    b.sequence_share = static_cast<double>(b.sequences) / static_cast<double>(st.count);
    b.token_share = st.total_tokens > 0
                        ? static_cast<double>(b.tokens) / static_cast<double>(st.total_tokens)
                        : 0.0;
  }
  return st;
}

std::string format_length_stats(const LengthStats& st) {
  std::string out;
  out += "| length | sequences | % sequences | tokens | % tokens |\n";
  out += "|---|---:|---:|---:|---:|\n";
  for (const auto& b : st.buckets) {
    out += fmt::format("| {} | {} | {:.2f} | {} | {:.2f} |\n", b.label, b.sequences,
                       100.0 * b.sequence_share, b.tokens, 100.0 * b.token_share);
  }
  out += fmt::format("| total | {} | 100.00 | {} | 100.00 |\n\n", st.count, st.total_tokens);
  out += fmt::format("mean {:.1f}, min {}, p50 {}, p90 {}, p99 {}, max {}\n", st.mean, st.min,
                     st.p50, st.p90, st.p99, st.max);
  return out;
}

}  // namespace infinipipe::data
