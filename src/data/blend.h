// Megatron-LM's data blending: `--data-path 0.3 A 0.7 B` draws samples from several datasets in
// fixed proportions. Which dataset sample i comes from is Megatron's build_blending_indices rule:
// the dataset whose share of the samples so far lags its weight most (ties to the lower index),
// so every prefix of the sample order holds each dataset within one sample of its weight.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace infinipipe::data {

struct BlendEntry {
  std::string prefix;  // Megatron indexed dataset PREFIX (.bin / .idx)
  double weight = 0;   // normalised over the blend; 0 until blend_weights_resolve when unweighted
};

// The words of --data-path: "PREFIX", "W1 P1 W2 P2 ...", or "P1 P2 ..." (no weights: each
// dataset weighs its number of documents, as if they were concatenated). Weights must be
// finite, non-negative and not all zero; they are normalised to sum 1. ConfigError otherwise.
std::vector<BlendEntry> blend_parse(std::span<const std::string> words);

// True when the words carry no weights (blend_parse leaves every weight 0).
bool blend_unweighted(std::span<const BlendEntry> blend);

// Normalised weights proportional to `counts` (documents per dataset); ConfigError if all are 0.
std::vector<double> blend_weights_from_counts(std::span<const int64_t> counts);

// The dataset of each successive sample, and how many samples each dataset has given so far.
class BlendCursor {
 public:
  explicit BlendCursor(std::vector<double> weights);  // normalised, as blend_parse returns
  int32_t next();                                     // the dataset of the next sample
  // Positions the cursor after `consumed` samples (replays the rule: O(consumed × datasets)).
  void set_consumed(int64_t consumed);
  int64_t consumed() const { return consumed_; }
  // Samples each dataset has given so far.
  const std::vector<int64_t>& taken() const { return taken_; }

 private:
  std::vector<double> weights_;
  std::vector<int64_t> taken_;
  int64_t consumed_ = 0;
};

}  // namespace infinipipe::data
