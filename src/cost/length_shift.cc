#include "cost/length_shift.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace infinipipe::cost {

int64_t length_p90(std::span<const int64_t> lengths) {
  if (lengths.empty()) return 0;
  std::vector<int64_t> sorted(lengths.begin(), lengths.end());
  std::sort(sorted.begin(), sorted.end());
  // Nearest rank: the smallest length at or above 90% of the batch.
  const size_t rank = (9 * sorted.size() + 9) / 10;
  return sorted[std::max<size_t>(rank, 1) - 1];
}

LengthShiftDetector::LengthShiftDetector(double tolerance) : tolerance_(tolerance) {
  if (!(tolerance > 0)) fail_config("length shift tolerance must be > 0, got {}", tolerance);
}

std::optional<std::string> LengthShiftDetector::observe(std::span<const int64_t> lengths) {
  if (lengths.empty()) return std::nullopt;
  const int64_t max = *std::max_element(lengths.begin(), lengths.end());
  const int64_t p90 = length_p90(lengths);
  const bool first = seen_.max == 0;
  const auto beyond = [&](int64_t v, int64_t seen) {
    return static_cast<double>(v) > (1.0 + tolerance_) * static_cast<double>(seen);
  };
  std::optional<std::string> out;
  if (!first && (beyond(max, seen_.max) || beyond(p90, seen_.p90))) {
    out = fmt::format(
        "batch lengths moved beyond what the cost fit has seen (longest {} vs {}, 90th "
        "percentile {} vs {}, more than {:.0f}% beyond)",
        max, seen_.max, p90, seen_.p90, 100 * tolerance_);
  }
  seen_.max = std::max(seen_.max, max);
  seen_.p90 = std::max(seen_.p90, p90);
  return out;
}

void LengthShiftDetector::restore(const LengthRange& seen) {
  if (seen.max < 0 || seen.p90 < 0 || seen.p90 > seen.max)
    fail(
        "length range: longest {} and 90th percentile {} must be >= 0, the percentile <= the "
        "longest",
        seen.max, seen.p90);
  seen_ = seen;
}

}  // namespace infinipipe::cost
