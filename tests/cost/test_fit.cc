#include "cost/fit.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/error.h"

namespace infinipipe::cost {
namespace {

ModelConfig fit_model() {
  ModelConfig m;
  m.num_layers = 8;
  m.hidden_size = 512;
  m.num_attention_heads = 8;
  m.seq_length = 16384;
  return m;
}

// Timings produced by a cost fit_model with known coefficients, with ±noise relative error.
std::vector<TimingSample> synthetic(const CostModel& cm, double noise, bool vary_layers,
                                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> jitter(1 - noise, 1 + noise);
  std::vector<TimingSample> out;
  for (int64_t len : {64, 256, 1024, 4096})
    for (int64_t ctx : {0, 1024, 8192})
      for (int64_t layers : {1, 4}) {
        if (!vary_layers && layers != 1) continue;
        TimingSample s;
        s.chunk = {{ctx, len}};
        if (ctx == 0 && len <= 256) s.chunk.push_back({0, len});  // packed chunks too
        s.num_layers = layers;
        s.seconds = cm.forward_time(s.chunk, StageShape{.num_layers = layers}) * jitter(rng);
        out.push_back(s);
      }
  return out;
}

TEST(Fit, RecoversKnownCoefficients) {
  CostModel truth(fit_model(), device_preset("cpu", false), 1, false);
  const Coefficients& c = truth.coefficients();
  auto samples = synthetic(truth, 0.0, true, 1);
  LayerTimeFit f = fit_layer_time(samples);
  EXPECT_NEAR(f.alpha1, c.alpha1, 1e-6 * c.alpha1);
  EXPECT_NEAR(f.alpha2, c.alpha2, 1e-6 * c.alpha2);
  EXPECT_NEAR(f.beta1, c.beta1, 1e-6 * c.beta1);
  EXPECT_NEAR(f.half_efficiency_tokens, c.half_efficiency_tokens, 1e-4 * c.half_efficiency_tokens);
  EXPECT_LT(f.rms_relative_residual, 1e-9);
  // Written back into coefficients, the fit_model predicts the samples.
  Coefficients back = c;
  back.alpha1 = back.alpha2 = back.beta1 = back.half_efficiency_tokens = 0;
  apply_layer_fit(f, 1, back);
  CostModel fitted(fit_model(), truth.device(), back, 1, false);
  for (const TimingSample& s : samples)
    EXPECT_NEAR(fitted.forward_time(s.chunk, StageShape{.num_layers = s.num_layers}), s.seconds,
                1e-9 * s.seconds);
}

TEST(Fit, ToleratesNoise) {
  CostModel truth(fit_model(), device_preset("cpu", false), 1, false);
  auto samples = synthetic(truth, 0.03, true, 7);
  LayerTimeFit f = fit_layer_time(samples);
  EXPECT_NEAR(f.alpha1, truth.coefficients().alpha1, 0.1 * truth.coefficients().alpha1);
  EXPECT_NEAR(f.alpha2, truth.coefficients().alpha2, 0.1 * truth.coefficients().alpha2);
  EXPECT_GT(f.rms_relative_residual, 0.001);
  EXPECT_LT(f.rms_relative_residual, 0.03);
}

TEST(Fit, SameLayerCountFoldsBeta1IntoGamma) {
  CostModel truth(fit_model(), device_preset("cpu", false), 1, false);
  auto samples = synthetic(truth, 0.0, false, 1);
  LayerTimeFit f = fit_layer_time(samples);
  EXPECT_EQ(f.beta1, 0.0);
  const Coefficients& c = truth.coefficients();
  EXPECT_NEAR(f.gamma, c.beta1 + c.alpha2 * c.half_efficiency_tokens, 1e-6 * f.gamma);
  for (const TimingSample& s : samples)
    EXPECT_NEAR(predict_layer_time(f, s), s.seconds, 1e-9 * s.seconds);
}

TEST(Fit, RatioAndLink) {
  std::vector<double> fwd = {1, 2, 3, 4}, bwd = {2.1, 3.9, 6.0, 8.1};
  EXPECT_NEAR(fit_ratio(fwd, bwd), 2.0, 0.05);
  std::vector<int64_t> bytes = {1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 26};
  std::vector<double> secs;
  for (int64_t b : bytes) secs.push_back(b / 8e9 + 4e-6);
  LinkFit l = fit_link(bytes, secs);
  EXPECT_NEAR(l.bandwidth, 8e9, 8e9 * 1e-6);
  EXPECT_NEAR(l.latency_s, 4e-6, 4e-12);
  EXPECT_LT(l.rms_relative_residual, 1e-9);
  // Times that fall with the size (small messages preempted on a busy host): no bandwidth.
  EXPECT_EQ(fit_link(bytes, std::vector<double>{4e-3, 4e-3, 4e-3, 1e-4, 1e-4}).bandwidth, 0);
}

TEST(Fit, BadInputsAreErrors) {
  std::vector<TimingSample> few(2);
  EXPECT_THROW(fit_layer_time(few), Error);
  std::vector<TimingSample> zero(5, TimingSample{{{0, 128}}, 1, 0.0});
  EXPECT_THROW(fit_layer_time(zero), Error);
  // All the same chunk: coefficients cannot be told apart.
  std::vector<TimingSample> same(5, TimingSample{{{0, 128}}, 1, 1e-3});
  EXPECT_THROW(fit_layer_time(same), Error);
  EXPECT_THROW(fit_ratio(std::vector<double>{}, std::vector<double>{}), Error);
  EXPECT_THROW(fit_link(std::vector<int64_t>{1}, std::vector<double>{1.0}), Error);
}

}  // namespace
}  // namespace infinipipe::cost
