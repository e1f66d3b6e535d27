// `infinipipe profile` end to end on a tiny model with a tiny grid: it times real chunks, fits,
// and writes a calibration that CostModel::from_config accepts. Timing accuracy is printed, never
// asserted (the machine is shared).
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "cost/calibration.h"
#include "cost/cost_model.h"
#include "obs/profile.h"

namespace infinipipe {
namespace {

Config tiny_config() {
  Config c;
  c.model.num_layers = 4;
  c.model.hidden_size = 64;
  c.model.num_attention_heads = 4;
  c.model.vocab_size = 257;
  c.model.seq_length = 512;
  c.parallel.pipeline_parallel = 2;
  c.training.global_batch_size = 4;
  c.validate();
  return c;
}

obs::ProfileGrid tiny_grid() {
  obs::ProfileGrid g;
  g.lens = {32, 64, 128, 256};
  g.contexts = {0, 128};
  g.packed = {{4, 32}, {2, 64}, {3, 48}};
  g.two_layer_lens = {32, 128};
  g.edge_lens = {64, 128};
  g.repeats = 2;
  g.sgemm_size = 256;
  g.threads = 1;  // parallel regions stall on a loaded 2-core machine; the test needs no speed
  return g;
}

TEST(Profile, QuickProfileWritesACalibrationThatPlanningAccepts) {
  Config cfg = tiny_config();
  int lines = 0;
  const obs::ProfileReport rep = obs::profile_run(cfg, tiny_grid(), [&](const std::string& line) {
    std::printf("%s\n", line.c_str());
    ++lines;
  });
  EXPECT_GT(lines, 0);
  // 8 single slices + 3 packed + 2 on two layers; interior points alternate into the held-out set.
  EXPECT_EQ(rep.samples.size(), 13u);
  EXPECT_EQ(rep.heldout_forward.count, 3);
  for (const obs::ProfileSample& s : rep.samples) {
    EXPECT_GT(s.forward_s, 0);
    EXPECT_GT(s.backward_s, 0);
  }
  const cost::Coefficients& c = rep.calibration.coeffs;
  EXPECT_GT(c.alpha2, 0);
  // The real dense-matmul rate is measured and recorded; the preset's peak is only an estimate.
  EXPECT_GT(rep.calibration.device.sgemm_flops, 1e8);
  EXPECT_NE(rep.calibration.notes.find("sgemm"), std::string::npos);
  EXPECT_GT(c.backward_factor, 0);
  for (double v : {c.alpha1, c.alpha2, c.beta1, c.half_efficiency_tokens, c.recompute_factor,
                   c.embedding_per_token, c.lm_head_per_token})
    EXPECT_TRUE(std::isfinite(v) && v >= 0) << v;
  std::printf(
      "tiny profile: %.2f s; held-out forward error median %.1f%% max %.1f%%, backward "
      "median %.1f%% max %.1f%%; fit residual %.1f%%\n",
      rep.seconds, rep.heldout_forward.median * 100, rep.heldout_forward.max * 100,
      rep.heldout_backward.median * 100, rep.heldout_backward.max * 100,
      rep.fit.rms_relative_residual * 100);

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ip_profile_" + std::to_string(getpid()) + ".json"))
                               .string();
  cost::save_calibration(rep.calibration, path);
  const cost::Calibration back = cost::load_calibration(path);
  EXPECT_EQ(cost::calibration_to_json(back), cost::calibration_to_json(rep.calibration));
  cfg.cluster.calibration = path;
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  EXPECT_EQ(cm.coefficients().alpha2, c.alpha2);
  EXPECT_EQ(cm.coefficients().index_bytes_per_token, c.index_bytes_per_token);
  const std::vector<cost::SliceShape> chunk = {{0, 256, true}};
  EXPECT_GT(cm.forward_time(chunk, {2, false, false}), 0);
  // Another model shape is refused with a ConfigError saying to profile again.
  Config other = cfg;
  other.model.hidden_size = 128;
  EXPECT_THROW(cost::CostModel::from_config(other), ConfigError);
  std::filesystem::remove(path);
}

// Without a calibration the engine's model moves the LM head's backward into its forward, where
// the engine's fused loss computes the head's gradient; the head's total time is unchanged.
TEST(Profile, EngineModelChargesTheLmHeadGradientToForward) {
  Config cfg = tiny_config();
  cfg.cluster.device = "cpu";
  const cost::CostModel preset = cost::CostModel::from_config(cfg);
  const cost::CostModel engine = obs::engine_cost_model(cfg);
  EXPECT_EQ(engine.coefficients().lm_head_backward_factor, 0.0);
  const std::vector<cost::SliceShape> chunk = {{0, 256, true}};
  const cost::StageShape mid{2, false, false}, last{2, false, true};
  auto head = [&](const cost::CostModel& cm, bool forward) {
    return forward ? cm.forward_time(chunk, last) - cm.forward_time(chunk, mid)
                   : cm.backward_time(chunk, last) - cm.backward_time(chunk, mid);
  };
  EXPECT_NEAR(head(engine, false), 0.0, 1e-15);
  EXPECT_GT(head(engine, true), head(preset, true));
  EXPECT_NEAR(head(engine, true), head(preset, true) + head(preset, false),
              1e-9 * head(engine, true));
}

TEST(Profile, BadGridIsAConfigError) {
  const Config cfg = tiny_config();
  obs::ProfileGrid g = tiny_grid();
  g.lens.clear();
  EXPECT_THROW(obs::profile_run(cfg, g, [](const std::string&) {}), ConfigError);
  g = tiny_grid();
  g.repeats = 0;
  EXPECT_THROW(obs::profile_run(cfg, g, [](const std::string&) {}), ConfigError);
  g = tiny_grid();
  g.lens = {64, -1};
  EXPECT_THROW(obs::profile_run(cfg, g, [](const std::string&) {}), ConfigError);
  g = tiny_grid();
  g.sgemm_size = 0;
  EXPECT_THROW(obs::profile_run(cfg, g, [](const std::string&) {}), ConfigError);
}

TEST(Profile, RelativeErrorIsMedianAndMax) {
  const obs::ProfileError e = obs::profile_relative_error({1.1, 2.0, 2.5}, {1.0, 2.0, 2.0});
  EXPECT_EQ(e.count, 3);
  EXPECT_NEAR(e.median, 0.1, 1e-12);
  EXPECT_NEAR(e.max, 0.25, 1e-12);
}

}  // namespace
}  // namespace infinipipe
