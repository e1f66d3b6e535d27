// The paper's baselines (sim/baseline_*.h): closed forms on small settings, and FlexSP's split
// never worse than any uniform one.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/error.h"
#include "sim/baseline_deepspeed.h"
#include "sim/baseline_flexsp.h"
#include "sim/baseline_megatron.h"

namespace infinipipe::sim {
namespace {

// A small Llama on an A800 cluster; one-sequence batches keep the closed forms short.
Config small_cluster(int64_t devices, int64_t per_node) {
  Config cfg;
  cfg.model.num_layers = 4;
  cfg.model.hidden_size = 1024;
  cfg.model.num_attention_heads = 8;
  cfg.model.ffn_hidden_size = 2816;
  cfg.model.vocab_size = 32000;
  cfg.model.seq_length = 16384;
  cfg.cluster.device = "a800-80gb";
  cfg.cluster.num_devices = devices;
  cfg.cluster.devices_per_node = per_node;
  cfg.training.bf16 = true;
  return cfg;
}

const cost::StageShape kAll{.num_layers = 4, .has_embedding = true, .has_lm_head = true};

TEST(Megatron, TensorParallelCollectivesInClosedForm) {
  const Config cfg = small_cluster(2, 2);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> batch = {8192};
  const BaselineResult r = simulate_megatron(cm, cfg, batch, {2, 1, 0, 0});
  const cost::Coefficients& c = cm.coefficients();
  // 2 all-gathers + 2 reduce-scatters of 8192 x 1024 bf16 per layer and pass, half of it sent.
  const double collective = 0.5 * 8192.0 * 1024 * 2 / c.p2p_bandwidth_intra + c.p2p_latency_s;
  const double tp = 4 * collective * 2 * 4;  // forward + backward, 4 layers, no recompute
  EXPECT_NEAR(r.comm_exposed_s, tp, 1e-12);  // dp 1: no gradient all-reduce
  const cost::CostModel g = cm.with_ulysses_degree(2, false);
  const std::vector<cost::SliceShape> chunk = {{0, 8192}};
  const double a2a = g.ulysses_alltoall_time(8192) * 8;
  EXPECT_NEAR(r.compute_time_s, g.forward_time(chunk, kAll) + g.backward_time(chunk, kAll) - a2a,
              1e-12);
  const double shard = static_cast<double>(cm.model().params_total()) / 2;
  EXPECT_NEAR(r.step_time_s, r.compute_time_s + r.comm_exposed_s + r.optimizer_time_s, 1e-12);
  EXPECT_EQ(r.peak_memory_bytes, static_cast<int64_t>(shard * c.bytes_per_param) +
                                     g.activation_bytes(chunk, kAll, 0) +
                                     std::max(g.forward_transient_bytes(chunk, kAll),
                                              g.backward_transient_bytes(chunk, kAll, 0)));
}

TEST(Megatron, ContextParallelRingHidesOnlyBehindAttention) {
  Config cfg = small_cluster(2, 1);        // cp 2 across two nodes of one device
  cfg.cluster.inter_node_bandwidth = 1e8;  // a slow link: the ring outlasts attention
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> batch = {8192};
  const BaselineResult r = simulate_megatron(cm, cfg, batch, {1, 2, 1, 0});
  const cost::CostModel g = cm.with_ulysses_degree(2, false);
  const std::vector<cost::SliceShape> chunk = {{0, 8192}};
  const double kv = 4096.0 * 2 * 1024 * 2;  // local K/V: 4096 tokens x 2 x kv dim, bf16
  const double ring = kv / 1e8 + cm.link_latency(true);
  const double attn = g.attention_seconds(chunk);
  const double kb = g.coefficients().backward_factor;
  const double cp = 4 * ((ring - attn) + (2 * ring - kb * attn)) + 1 * (ring - attn);
  // Gradients all-reduced over the 2 cp ranks: 2 ring halves of the fp32 gradients.
  const double grads = static_cast<double>(cm.model().params_total()) * 4.0;
  const double ar = 2 * (0.5 * grads / 1e8 + cm.link_latency(true));
  EXPECT_NEAR(r.comm_exposed_s, cp + ar, 1e-9);
  EXPECT_GT(ring, kb * attn);  // the closed form above assumed every max() picks the ring
}

TEST(Megatron, RefusesImpossibleSettings) {
  const Config cfg = small_cluster(8, 8);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> batch = {4096};
  EXPECT_THROW(simulate_megatron(cm, cfg, batch, {3, 1, 0, 0}), ConfigError);
  EXPECT_THROW(simulate_megatron(cm, cfg, batch, {8, 2, 0, 0}), ConfigError);
  EXPECT_THROW(simulate_megatron(cm, cfg, batch, {8, 1, 5, 0}), ConfigError);
  EXPECT_THROW(simulate_megatron(cm, cfg, batch, {8, 1, 0, 2048}), ConfigError);
}

TEST(Megatron, PaperSettingByModelSize) {
  ModelConfig m7;
  m7.num_layers = 32, m7.hidden_size = 4096, m7.num_attention_heads = 32;
  m7.ffn_hidden_size = 11008, m7.vocab_size = 32000;
  const MegatronSetting s = megatron_paper_setting(m7);
  EXPECT_EQ(s.tp, 8);
  EXPECT_EQ(s.cp, 2);
  EXPECT_EQ(s.recompute_layers, 10);
}

TEST(DeepSpeed, StepInClosedForm) {
  const Config cfg = small_cluster(2, 2);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> batch = {8192};
  const BaselineResult r = simulate_deepspeed(cm, cfg, batch, {2, 4, 0});
  const cost::CostModel g = cm.with_ulysses_degree(2, false);
  const std::vector<cost::SliceShape> chunk = {{0, 8192}};
  const double a2a = g.ulysses_alltoall_time(8192) * (2 * 4 + 4);
  const double compute =
      g.forward_time(chunk, kAll) + g.backward_time(chunk, kAll) + g.recompute_time(chunk, 4) - a2a;
  const double params = static_cast<double>(cm.model().params_total()) * 2;
  const double zero =
      3 * (0.5 * params / cm.coefficients().p2p_bandwidth_intra + cm.coefficients().p2p_latency_s);
  EXPECT_NEAR(r.compute_time_s, compute, 1e-12);
  EXPECT_NEAR(r.comm_exposed_s, a2a + std::max(0.0, zero - compute), 1e-12);
  EXPECT_EQ(r.peak_memory_bytes, zero3_static_bytes(cm, 2) + g.activation_bytes(chunk, kAll, 4) +
                                     std::max(g.forward_transient_bytes(chunk, kAll),
                                              g.backward_transient_bytes(chunk, kAll, 4)));
}

TEST(DeepSpeed, UnevenHeadsPayTheBusiestDevice) {
  Config cfg = small_cluster(4, 4);
  cfg.model.num_attention_heads = 6;  // sp 4: the busiest device has 2 heads, the mean 1.5
  cfg.model.hidden_size = 768;
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<cost::SliceShape> chunk = {{0, 8192}};
  const SpMicroBatch mb = sp_micro_batch(cm, cfg, 4, chunk, 0);
  const cost::CostModel g = cm.with_ulysses_degree(4, false);
  const double a2a = g.ulysses_alltoall_time(8192) * 8;
  const double even = g.forward_time(chunk, kAll) + g.backward_time(chunk, kAll) - a2a;
  const double attn = g.attention_seconds(chunk) * 4 * (1 + g.coefficients().backward_factor);
  EXPECT_NEAR(mb.compute, even + attn / 3, 1e-12);
  EXPECT_THROW(simulate_deepspeed(cm, cfg, std::vector<int64_t>{4096}, {8, -1, 0}), ConfigError);
}

// FlexSP's best split is never slower than any uniform split (every sp group the same size),
// and never faster than its lower bound.
TEST(FlexSp, NeverWorseThanTheBestUniformDegree) {
  Config cfg = small_cluster(16, 8);
  cfg.model.seq_length = 65536;
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> len(8.0, 1.5);
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<int64_t> batch;
    for (int i = 0; i < 48; ++i)
      batch.push_back(std::clamp<int64_t>(static_cast<int64_t>(len(rng)), 64, 65536));
    const FlexSpResult best = simulate_flexsp(cm, cfg, batch);
    ASSERT_FALSE(best.result.oom) << best.result.reason;
    EXPECT_GE(best.result.step_time_s, best.lower_bound_s * (1 - 1e-9)) << trial;
    for (int64_t s : flexsp_group_sizes(cfg, cm.model())) {
      const std::vector<int64_t> uniform(static_cast<size_t>(16 / s), s);
      const FlexSpResult u = simulate_flexsp_groups(cm, cfg, batch, uniform);
      if (!u.result.oom) {
        EXPECT_LE(best.result.step_time_s, u.result.step_time_s) << trial << " sp " << s;
      }
    }
  }
}

TEST(FlexSp, GroupsMustCoverTheDevices) {
  const Config cfg = small_cluster(16, 8);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> batch = {4096, 2048};
  EXPECT_THROW(simulate_flexsp_groups(cm, cfg, batch, std::vector<int64_t>{8, 4}), ConfigError);
  EXPECT_THROW(simulate_flexsp_groups(cm, cfg, batch, std::vector<int64_t>{12, 4}), ConfigError);
  const FlexSpResult f = simulate_flexsp_groups(cm, cfg, batch, std::vector<int64_t>{8, 8});
  EXPECT_EQ(f.group_time_s.size(), 2u);
}

}  // namespace
}  // namespace infinipipe::sim
