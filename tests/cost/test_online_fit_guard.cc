// The online fit's guard against timings as noisy as those of ranks sharing two cores (±30%):
// bounding the step term by term, or clamping a term at its bound after the recursion counted
// on it moving, biased the correlated terms (β1 walked to its floor, the efficiency curve's
// t_half to a quarter of its value) and doubled the prediction error; and such noise must not
// bias the predictions' mean.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "cost/fit_test_model.h"
#include "cost/online_fit.h"

namespace infinipipe::cost {
namespace {

// The first stage of a pipeline (3 layers and the embedding): packed short sequences and slices
// of long ones, backwards with 0..3 recomputed layers.
class FirstStageActions {
 public:
  explicit FirstStageActions(uint64_t seed) : rng_(seed) {}
  ActionSample next() {
    ActionSample s;
    s.stage = {3, true, false};
    if (pick(0, 1) == 0) {
      for (int64_t i = 0, n = pick(1, 4); i < n; ++i) s.chunk.push_back({0, pick(32, 2048), true});
    } else {
      s.chunk.push_back({pick(0, 2) * 1024, pick(256, 2048), true});
    }
    s.backward = pick(0, 1) == 1;
    if (s.backward) s.recompute_layers = pick(0, 3);
    return s;
  }
  double noise(double rel) {
    return std::uniform_real_distribution<double>(1 - rel, 1 + rel)(rng_);
  }

 private:
  int64_t pick(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  std::mt19937_64 rng_;
};

// Feeds `n` first-stage actions (generator `seed`) timed by `truth` with ±`noise` uniform noise.
void feed_noisy(OnlineFit& fit, const CostModel& truth, uint64_t seed, int n, double noise) {
  FirstStageActions src(seed);
  for (int i = 0; i < n; ++i) {
    ActionSample s = src.next();
    s.seconds = fit_test_true_time(truth, s) * src.noise(noise);
    fit.update(s);
  }
}

// The fit's predictions summed over 400 probe actions (generator `seed`), over the truth's.
double summed_ratio(const OnlineFit& fit, const CostModel& truth, uint64_t seed) {
  double predicted = 0, real = 0;
  FirstStageActions probe(seed);
  for (int i = 0; i < 400; ++i) {
    const ActionSample s = probe.next();
    predicted += fit.predict(s);
    real += fit_test_true_time(truth, s);
  }
  return predicted / real;
}

struct Errors {
  double forward = 0, backward = 0;  // median relative error against the noise-free truth
};

Errors fit_errors(const CostModel& prior, const CostModel& truth) {
  OnlineFit fit(prior);
  feed_noisy(fit, truth, 3, 3000, 0.3);
  std::vector<double> f, b;
  FirstStageActions probe(17);
  for (int i = 0; i < 400; ++i) {
    const ActionSample s = probe.next();
    const double y = fit_test_true_time(truth, s);
    (s.backward ? b : f).push_back(std::abs(fit.predict(s) - y) / y);
  }
  std::sort(f.begin(), f.end());
  std::sort(b.begin(), b.end());
  return {f[f.size() / 2], b[b.size() / 2]};
}

Coefficients machine(const CostModel& prior) {
  Coefficients t = prior.coefficients();
  t.alpha1 *= 1.3;
  t.alpha2 *= 1.6;
  t.beta1 *= 3;
  t.backward_factor = 2.2;
  t.recompute_factor = 1.0;
  return t;
}

// With each term bounded on its own (the guard before): forward 4.6%, backward 7.3%.
TEST(OnlineFitGuard, NoisyTimingsDoNotBiasTheCorrelatedTerms) {
  const CostModel prior = fit_test_prior(16384);
  const Errors e = fit_errors(prior, fit_test_model_with(machine(prior)));
  EXPECT_LT(e.forward, 0.03);
  EXPECT_LT(e.backward, 0.05);
}

// A calibration whose recompute factor is 5x too small (as `profile --quick` gives on a busy
// machine): the fit can take it only to its ceiling (4x), and the other terms must explain the
// rest with it held there, not as if it had moved. The guard before: forward 4.6%, backward 8.4%.
TEST(OnlineFitGuard, ATermHeldAtItsCeilingLeavesTheOthersRight) {
  const CostModel base = fit_test_prior(16384);
  Coefficients p = base.coefficients();
  p.recompute_factor = 0.2;
  const CostModel prior = fit_test_model_with(p);
  const Errors e = fit_errors(prior, fit_test_model_with(machine(base)));
  EXPECT_LT(e.forward, 0.03);
  EXPECT_LT(e.backward, 0.06);
}

// A calibration whose backward factor is below 1 (0.12: a profile whose backwards were timed
// while other processes ran on the cores) cannot be right, since a backward runs its forward's
// matmuls twice, and the fit must not be held near it: with its ceiling 4x the calibrated value
// (0.47), a training run's step error stayed at +25 % (docs/benchmarks.md, "Where the
// predictions stand"). It reaches the machine's 2.2 within 400 samples (twenty iterations of a
// demo rank's actions).
TEST(OnlineFitGuard, ABackwardFactorBelowOneIsNotHeldNearIt) {
  const CostModel base = fit_test_prior(16384);
  Coefficients p = base.coefficients();
  p.backward_factor = 0.12;
  const CostModel prior = fit_test_model_with(p);
  const CostModel truth = fit_test_model_with(machine(base));
  OnlineFit fit(prior);
  feed_noisy(fit, truth, 11, 400, 0.3);
  EXPECT_NEAR(fit.coefficients().backward_factor, 2.2, 0.2);
  EXPECT_NEAR(summed_ratio(fit, truth, 31), 1.0, 0.05);
  const Errors e = fit_errors(prior, truth);
  EXPECT_LT(e.forward, 0.03);
  EXPECT_LT(e.backward, 0.05);
}

// A step is a sum of actions, so each action's prediction must be its mean time. Timings with
// +-30 % noise of mean 1 around the truth: summed over probe actions, the fit's predictions come
// within 2 % of the truth's. Regressing relative to the measured times instead, the sum came out
// 2.3 % short here (a single term would settle at E[1/y] / E[1/y^2] of the noise, 6 % short).
TEST(OnlineFitGuard, NoisyTimingsAreFittedToTheirMean) {
  const CostModel prior = fit_test_prior(16384);
  const CostModel truth = fit_test_model_with(machine(prior));
  OnlineFit fit(prior);
  feed_noisy(fit, truth, 5, 3000, 0.3);
  EXPECT_NEAR(summed_ratio(fit, truth, 23), 1.0, 0.02);
}

// A prior far off the machine (the profile's kernels against a training rank's actions: 20-40 %
// short in the demo's first iterations) is mostly caught up within five iterations of a demo
// rank's actions (about 20 each), whether the machine is uniformly slower or its terms are off
// each by its own factor (machine() above). With each term's uncertainty its own (sd 3) the
// summed predictions were still 0.904 and 0.909 of the truth after 100 samples, the ±30 % noisy
// samples spent on splitting a common gap between nine terms (0.897 and 0.871 when a bounded
// step also shrank the covariance as if it had been taken whole).
TEST(OnlineFitGuard, APriorFarOffIsCaughtUpWithinFiveIterations) {
  const CostModel prior = fit_test_prior(16384);
  Coefficients uniform = prior.coefficients();
  for (double* t : {&uniform.alpha1, &uniform.alpha2, &uniform.beta1, &uniform.embedding_per_token,
                    &uniform.lm_head_per_token})
    *t *= 1.35;
  for (const Coefficients& machine_terms : {uniform, machine(prior)}) {
    const CostModel truth = fit_test_model_with(machine_terms);
    OnlineFit fit(prior);
    EXPECT_LT(summed_ratio(fit, truth, 29), 0.75);
    feed_noisy(fit, truth, 7, 100, 0.3);
    EXPECT_GT(summed_ratio(fit, truth, 29), 0.92);
  }
}

}  // namespace
}  // namespace infinipipe::cost
