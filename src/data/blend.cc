#include "data/blend.h"

#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace infinipipe::data {

namespace {

// A weight word: the whole word is a finite number.
bool weight_parse(const std::string& word, double& out) {
  if (word.empty()) return false;
  char* end = nullptr;
  out = std::strtod(word.c_str(), &end);
  return end == word.c_str() + word.size();
}

void weights_normalise(std::vector<BlendEntry>& blend) {
  double sum = 0;
  for (const BlendEntry& e : blend) sum += e.weight;
  if (!(sum > 0) || !std::isfinite(sum)) {
    fail_config("--data-path: the blend's weights sum to {}; give positive weights", sum);
  }
  for (BlendEntry& e : blend) e.weight /= sum;
}

}  // namespace

std::vector<BlendEntry> blend_parse(std::span<const std::string> words) {
  if (words.empty()) fail_config("--data-path needs at least one dataset PREFIX");
  double first = 0;
  std::vector<BlendEntry> blend;
  if (!weight_parse(words[0], first)) {
    for (const std::string& w : words) {
      double x = 0;
      if (weight_parse(w, x)) {
        fail_config(
            "--data-path: '{}' looks like a weight, but the list does not start with one; give "
            "either only prefixes or weight-prefix pairs ('0.3 A 0.7 B')",
            w);
      }
      blend.push_back({w, 0.0});
    }
    return blend;
  }
  if (words.size() % 2 != 0) {
    fail_config(
        "--data-path: {} words, but a weighted blend is weight-prefix pairs ('0.3 A 0.7 B'); "
        "the last weight has no prefix",
        words.size());
  }
  for (size_t i = 0; i < words.size(); i += 2) {
    double w = 0;
    if (!weight_parse(words[i], w) || !std::isfinite(w) || w < 0) {
      fail_config("--data-path: '{}' should be the weight of '{}': a finite number ≥ 0", words[i],
                  words[i + 1]);
    }
    double x = 0;
    if (weight_parse(words[i + 1], x)) {
      fail_config("--data-path: '{}' should be a dataset prefix after the weight '{}'",
                  words[i + 1], words[i]);
    }
    blend.push_back({words[i + 1], w});
  }
  weights_normalise(blend);
  return blend;
}

bool blend_unweighted(std::span<const BlendEntry> blend) {
  for (const BlendEntry& e : blend) {
    if (e.weight != 0) return false;
  }
  return true;
}

std::vector<double> blend_weights_from_counts(std::span<const int64_t> counts) {
  double sum = 0;
  for (int64_t c : counts) sum += static_cast<double>(c);
  if (!(sum > 0)) fail_config("--data-path: the datasets hold no documents to train on");
  std::vector<double> w;
  for (int64_t c : counts) w.push_back(static_cast<double>(c) / sum);
  return w;
}

BlendCursor::BlendCursor(std::vector<double> weights)
    : weights_(std::move(weights)), taken_(weights_.size(), 0) {
  if (weights_.empty()) fail_config("a blend needs at least one dataset");
}

int32_t BlendCursor::next() {
  // Megatron uses max(i, 1) so that the first sample goes to the heaviest dataset.
  const double at = std::max<double>(static_cast<double>(consumed_), 1.0);
  size_t best = 0;
  double best_lag = weights_[0] * at - static_cast<double>(taken_[0]);
  for (size_t d = 1; d < weights_.size(); ++d) {
    const double lag = weights_[d] * at - static_cast<double>(taken_[d]);
    if (lag > best_lag) {
      best = d;
      best_lag = lag;
    }
  }
  ++taken_[best];
  ++consumed_;
  return static_cast<int32_t>(best);
}

void BlendCursor::set_consumed(int64_t consumed) {
  if (consumed < 0) fail("consumed samples must not be negative, got {}", consumed);
  std::fill(taken_.begin(), taken_.end(), 0);
  consumed_ = 0;
  if (weights_.size() == 1) {
    taken_[0] = consumed_ = consumed;
    return;
  }
  while (consumed_ < consumed) next();
}

}  // namespace infinipipe::data
