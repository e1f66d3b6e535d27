#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace infinipipe {

void SamplingOptions::validate() const {
  if (!(temperature >= 0.0) || !std::isfinite(temperature)) {
    fail_config(
        "--temperature {} must be a finite number ≥ 0 (0 or --greedy picks the most likely "
        "token; 1 samples the model's distribution as it is)",
        temperature);
  }
  if (top_k < 0) {
    fail_config("--top-k {} must be ≥ 0 (0 keeps every token, k keeps the k most likely)", top_k);
  }
  if (!(top_p > 0.0 && top_p <= 1.0)) {
    fail_config(
        "--top-p {} must lie in (0, 1] (1 keeps every token, 0.9 the most likely tokens whose "
        "probabilities sum to 0.9)",
        top_p);
  }
}

uint64_t SamplingRng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SamplingRng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

int32_t sampling_argmax(std::span<const float> logits) {
  if (logits.empty()) fail("sampling: no logits");
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

namespace {

// HF's TopKLogitsWarper: every score below the k-th largest is removed.
void top_k_filter(std::vector<double>& scores, int64_t k) {
  if (k <= 0 || k >= static_cast<int64_t>(scores.size())) return;
  std::vector<double> sorted = scores;
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<>());
  const double kth = sorted[static_cast<size_t>(k - 1)];
  for (double& s : scores) {
    if (s < kth) s = -std::numeric_limits<double>::infinity();
  }
}

// Softmax in place; removed (−inf) scores get probability 0.
void softmax(std::vector<double>& scores) {
  const double top = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (double& s : scores) sum += (s = std::exp(s - top));
  for (double& s : scores) s /= sum;
}

// HF's TopPLogitsWarper on probabilities: in ascending order, the tokens whose cumulative
// probability stays ≤ 1 − p are removed; the most likely token always stays. Renormalises.
void top_p_filter(std::vector<double>& probs, double p) {
  if (p >= 1.0) return;
  std::vector<size_t> order(probs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return probs[a] < probs[b]; });
  double cumulative = 0;
  for (size_t i = 0; i + 1 < order.size(); ++i) {
    cumulative += probs[order[i]];
    if (cumulative > 1.0 - p) break;
    probs[order[i]] = 0;
  }
  const double kept = std::accumulate(probs.begin(), probs.end(), 0.0);
  for (double& q : probs) q /= kept;
}

}  // namespace

std::vector<double> sampling_distribution(std::span<const float> logits,
                                          const SamplingOptions& opts) {
  if (logits.empty()) fail("sampling: no logits");
  if (opts.is_greedy()) fail("sampling: greedy options have no distribution; use sampling_pick");
  std::vector<double> scores(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) scores[i] = logits[i] / opts.temperature;
  top_k_filter(scores, opts.top_k);
  softmax(scores);
  top_p_filter(scores, opts.top_p);
  return scores;
}

int32_t sampling_pick(std::span<const float> logits, const SamplingOptions& opts,
                      SamplingRng& rng) {
  if (opts.is_greedy()) return sampling_argmax(logits);
  const std::vector<double> probs = sampling_distribution(logits, opts);
  const double u = rng.uniform();
  double cumulative = 0;
  int32_t last_kept = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    last_kept = static_cast<int32_t>(i);
    cumulative += probs[i];
    if (u < cumulative) return last_kept;
  }
  return last_kept;  // u beyond the rounded total: the last kept token
}

}  // namespace infinipipe
