// The sampler on hand-built logits: Hugging Face's warpers (temperature, top-k, top-p, in that
// order) give the distributions their definitions do, draws follow them, and the generator is
// splitmix64 as specified.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error_text.h"
#include "core/error.h"
#include "model/sampling.h"

namespace infinipipe {

using namespace infinipipe::testing;

namespace {

std::vector<double> softmax(const std::vector<double>& x) {
  double sum = 0;
  std::vector<double> p;
  for (double v : x) sum += std::exp(v);
  for (double v : x) p.push_back(std::exp(v) / sum);
  return p;
}

void expect_probs(const std::vector<double>& got, const std::vector<double>& want,
                  double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "token " << i;
}

// Probabilities 0.05, 0.5, 0.15, 0.3 as logits (any constant shift is the same distribution).
const std::vector<float> kLogits{std::log(0.05f), std::log(0.5f), std::log(0.15f), std::log(0.3f)};
std::vector<double> probs_of_logits() {
  std::vector<double> x(kLogits.begin(), kLogits.end());
  return softmax(x);
}

TEST(Sampling, TemperatureDividesTheLogits) {
  const std::vector<float> logits{1.0f, 2.0f, 3.0f, 0.0f};
  expect_probs(sampling_distribution(logits, {false, 0.5, 0, 1.0}), softmax({2, 4, 6, 0}));
  expect_probs(sampling_distribution(logits, {false, 1.0, 0, 1.0}), softmax({1, 2, 3, 0}));
}

TEST(Sampling, TopKKeepsTheKMostLikelyRenormalised) {
  const std::vector<double> p = probs_of_logits();
  expect_probs(sampling_distribution(kLogits, {false, 1.0, 2, 1.0}),
               {0, p[1] / (p[1] + p[3]), 0, p[3] / (p[1] + p[3])});
  expect_probs(sampling_distribution(kLogits, {false, 1.0, 9, 1.0}), p);  // k beyond V: all
  // Ties at the k-th value are kept, as HF's `scores < topk(...)[-1]` does.
  const std::vector<float> tied{1.0f, 3.0f, 1.0f, 0.0f};
  const std::vector<double> d = sampling_distribution(tied, {false, 1.0, 2, 1.0});
  EXPECT_GT(d[0], 0);
  EXPECT_GT(d[2], 0);
  EXPECT_EQ(d[3], 0);
}

TEST(Sampling, TopPKeepsTheSmallestMostLikelySetReachingP) {
  const std::vector<double> p = probs_of_logits();  // 0.05, 0.5, 0.15, 0.3
  // p = 0.75: 0.5 + 0.3 reach it; 0.15 and 0.05 go.
  expect_probs(sampling_distribution(kLogits, {false, 1.0, 0, 0.75}),
               {0, p[1] / (p[1] + p[3]), 0, p[3] / (p[1] + p[3])});
  // p = 0.9: 0.5 + 0.3 fall short, 0.15 is needed; only 0.05 goes.
  const double kept = p[1] + p[2] + p[3];
  expect_probs(sampling_distribution(kLogits, {false, 1.0, 0, 0.9}),
               {0, p[1] / kept, p[2] / kept, p[3] / kept});
  // The most likely token always stays.
  expect_probs(sampling_distribution(kLogits, {false, 1.0, 0, 1e-9}), {0, 1, 0, 0});
}

TEST(Sampling, WarpersApplyInHuggingFacesOrder) {
  // Temperature 0.5 squares the probabilities (then renormalises): 0.0025, 0.25, 0.0225, 0.09
  // over 0.365. top-k 3 drops 0.0025; top-p 0.8 then drops 0.0225 (0.0225 / 0.3625 ≤ 0.2).
  // (The logits are floats: the decimal closed form holds to about 1e-8.)
  const std::vector<double> got = sampling_distribution(kLogits, {false, 0.5, 3, 0.8});
  expect_probs(got, {0, 0.25 / 0.34, 0, 0.09 / 0.34}, 1e-7);
}

TEST(Sampling, DrawsFollowTheDistribution) {
  const SamplingOptions o{false, 1.3, 3, 0.95};
  const std::vector<double> want = sampling_distribution(kLogits, o);
  SamplingRng rng(42);
  std::vector<double> count(want.size(), 0);
  const int n = 200000;
  for (int i = 0; i < n; ++i) count[static_cast<size_t>(sampling_pick(kLogits, o, rng))] += 1;
  for (size_t i = 0; i < want.size(); ++i) {
    const double sigma = std::sqrt(want[i] * (1 - want[i]) / n);
    if (want[i] == 0) {
      EXPECT_EQ(count[i], 0) << "token " << i << " was filtered out but drawn";
    } else {
      EXPECT_NEAR(count[i] / n, want[i], 5 * sigma) << "token " << i;
    }
  }
}

TEST(Sampling, GreedyIsTheFirstArgmaxAndIgnoresTheGenerator) {
  const std::vector<float> logits{0.5f, 2.0f, -1.0f, 2.0f};
  SamplingRng rng(1);
  EXPECT_EQ(sampling_pick(logits, {true, 1.0, 0, 1.0}, rng), 1);
  EXPECT_EQ(sampling_pick(logits, {false, 0.0, 0, 1.0}, rng), 1);  // temperature 0
  EXPECT_EQ(sampling_argmax(logits), 1);
  EXPECT_THROW(sampling_distribution(logits, {true, 1.0, 0, 1.0}), Error);
}

TEST(Sampling, TheGeneratorIsSplitmix64) {
  SamplingRng rng(0);  // the published first outputs of splitmix64 from state 0
  EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ULL);
  SamplingRng u(7);
  for (int i = 0; i < 1000; ++i) {
    const double x = u.uniform();
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
  }
}

TEST(Sampling, BadOptionsAreClearErrors) {
  EXPECT_NE(error_text([] {
              SamplingOptions{false, -1.0, 0, 1.0}.validate();
            }).find("--temperature -1 must be a finite number ≥ 0"),
            std::string::npos);
  EXPECT_NE(error_text([] {
              SamplingOptions{false, NAN, 0, 1.0}.validate();
            }).find("--temperature"),
            std::string::npos);
  EXPECT_NE(error_text([] {
              SamplingOptions{false, 1.0, -2, 1.0}.validate();
            }).find("--top-k -2 must be ≥ 0"),
            std::string::npos);
  for (double p : {0.0, -0.1, 1.5}) {
    EXPECT_NE(error_text([p] {
                SamplingOptions{false, 1.0, 0, p}.validate();
              }).find("must lie in (0, 1]"),
              std::string::npos)
        << p;
  }
  EXPECT_THROW((SamplingOptions{false, 1.0, 0, 0.0}.validate()), ConfigError);
  EXPECT_NO_THROW((SamplingOptions{false, 0.0, 5, 1.0}.validate()));
}

}  // namespace
}  // namespace infinipipe
