// Notices when batches' sequence lengths leave what the online fit has seen: the fit's terms
// were learned from the shapes so far, and a batch much longer than those (its longest or its
// 90th-percentile length more than `tolerance` beyond the largest seen) runs in a regime the
// fit has no measurement of (attention's quadratic term grows, efficiency saturates). The
// Trainer then widens the fit (OnlineFit::widen) so the new shapes move the terms quickly.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace infinipipe::cost {

struct LengthRange {
  int64_t max = 0;  // the longest sequence seen
  int64_t p90 = 0;  // the largest 90th-percentile length of a batch seen
};

// The 90th-percentile length (nearest rank) of `lengths`; 0 when empty.
int64_t length_p90(std::span<const int64_t> lengths);

class LengthShiftDetector {
 public:
  // tolerance: the relative growth beyond the seen range that counts as a shift (0.15: 15%).
  explicit LengthShiftDetector(double tolerance = 0.15);

  // Takes a batch's lengths into the seen range. Returns a sentence saying what moved when the
  // batch goes beyond the range by more than the tolerance (never for the first batch, which
  // starts the range), nullopt otherwise.
  std::optional<std::string> observe(std::span<const int64_t> lengths);

  const LengthRange& seen() const { return seen_; }
  // Continues from a saved range (a checkpoint's). Error for negative lengths or p90 > max.
  void restore(const LengthRange& seen);

 private:
  double tolerance_;
  LengthRange seen_;
};

}  // namespace infinipipe::cost
