#include "sim/ulysses.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace infinipipe::sim {
namespace {

Config llama7b_on(int64_t devices, int64_t per_node = 8) {
  Config cfg;
  cfg.model.num_layers = 32;
  cfg.model.hidden_size = 4096;
  cfg.model.num_attention_heads = 32;
  cfg.model.ffn_hidden_size = 11008;
  cfg.model.vocab_size = 32000;
  cfg.model.seq_length = 1 << 21;
  cfg.cluster.device = "a800-80gb";
  cfg.cluster.num_devices = devices;
  cfg.cluster.devices_per_node = per_node;
  cfg.training.bf16 = true;
  return cfg;
}

cost::CostModel model_of(const Config& cfg) {
  return cost::CostModel::from_config(cfg);
}

TEST(Ulysses, MoreDevicesLessMemory) {
  const std::vector<int64_t> lengths = {32768, 32768, 16384, 8192};
  int64_t prev = INT64_MAX;
  for (int64_t n : {4, 8, 16, 32}) {
    Config cfg = llama7b_on(n);
    UlyssesResult r = simulate_ulysses_setting(model_of(cfg), cfg, lengths, {n, true, 32768});
    EXPECT_LT(r.peak_memory_bytes, prev) << n;
    prev = r.peak_memory_bytes;
    EXPECT_EQ(r.dp_degree, 1);
  }
}

TEST(Ulysses, OomWhenTheSequenceCannotFit) {
  Config cfg = llama7b_on(8);
  const cost::CostModel cm = model_of(cfg);
  const std::vector<int64_t> fits = {65536, 4096, 4096};
  UlyssesResult ok = simulate_ulysses(cm, cfg, fits);
  EXPECT_FALSE(ok.oom) << ok.reason;
  EXPECT_LE(ok.peak_memory_bytes, ok.memory_budget_bytes);
  const std::vector<int64_t> huge = {2000000, 4096};
  UlyssesResult bad = simulate_ulysses(cm, cfg, huge);
  EXPECT_TRUE(bad.oom);
  EXPECT_GT(bad.peak_memory_bytes, bad.memory_budget_bytes);
  EXPECT_NE(bad.reason.find("no setting fits"), std::string::npos);
  // A smaller budget turns the feasible batch into an OOM.
  cfg.training.memory_budget = 4LL << 30;
  EXPECT_TRUE(simulate_ulysses(cm, cfg, fits).oom);
}

TEST(Ulysses, SearchPicksTheFastestFeasibleSetting) {
  Config cfg = llama7b_on(16);
  const cost::CostModel cm = model_of(cfg);
  std::vector<int64_t> lengths;
  for (int i = 0; i < 64; ++i) lengths.push_back(1024 + 977 * (i % 9) * (i % 5));
  lengths.push_back(49152);
  UlyssesResult best = simulate_ulysses(cm, cfg, lengths);
  ASSERT_FALSE(best.oom) << best.reason;
  // The capacities the search tries: powers of two times the longest sequence.
  for (int64_t sp : {1, 2, 4, 8, 16})
    for (bool rc : {false, true})
      for (int64_t cap : {49152, 98304}) {
        UlyssesResult r = simulate_ulysses_setting(cm, cfg, lengths, {sp, rc, cap});
        if (!r.oom) {
          EXPECT_LE(best.step_time_s, r.step_time_s * (1 + 1e-12)) << sp << rc << cap;
        }
      }
  int64_t tokens = 0;
  for (int64_t l : lengths) tokens += l;
  EXPECT_NEAR(best.tokens_per_s, tokens / best.step_time_s, 1e-6 * best.tokens_per_s);
  EXPECT_GT(best.mfu, 0.05);
  EXPECT_LT(best.mfu, cm.device().matmul_efficiency);
  EXPECT_NEAR(
      best.step_time_s,
      best.compute_time_s + best.alltoall_time_s + best.zero_exposed_s + best.optimizer_time_s,
      1e-9);
}

TEST(Ulysses, RecomputeTradesTimeForMemory) {
  Config cfg = llama7b_on(8);
  const cost::CostModel cm = model_of(cfg);
  const std::vector<int64_t> lengths = {16384, 16384};
  UlyssesResult keep = simulate_ulysses_setting(cm, cfg, lengths, {8, false, 16384});
  UlyssesResult rc = simulate_ulysses_setting(cm, cfg, lengths, {8, true, 16384});
  EXPECT_LT(rc.peak_memory_bytes, keep.peak_memory_bytes);
  EXPECT_GT(rc.step_time_s, keep.step_time_s);
  EXPECT_GT(rc.alltoall_time_s, keep.alltoall_time_s);  // recompute repeats the forward a2a
  EXPECT_EQ(keep.micro_batch_rounds, 2);
}

TEST(Ulysses, SpanningNodesSlowsTheAllToAll) {
  Config cfg = llama7b_on(16);
  const cost::CostModel cm = model_of(cfg);
  const std::vector<int64_t> lengths = {65536};
  UlyssesResult in_node = simulate_ulysses_setting(cm, cfg, lengths, {8, true, 65536});
  UlyssesResult across = simulate_ulysses_setting(cm, cfg, lengths, {16, true, 65536});
  EXPECT_GT(across.alltoall_time_s, in_node.alltoall_time_s);
}

TEST(Ulysses, BadInputsAreClearErrors) {
  Config cfg = llama7b_on(8);
  const cost::CostModel cm = model_of(cfg);
  const std::vector<int64_t> lengths = {4096};
  EXPECT_THROW(simulate_ulysses_setting(cm, cfg, lengths, {3, false, 4096}), ConfigError);
  EXPECT_THROW(simulate_ulysses_setting(cm, cfg, lengths, {8, false, 2048}), ConfigError);
  EXPECT_THROW(simulate_ulysses(cm, cfg, std::vector<int64_t>{}), ConfigError);
  EXPECT_THROW(simulate_ulysses(cm, cfg, std::vector<int64_t>{4096, -1}), Error);
  cfg.model.num_attention_heads = 7;  // no degree divides both 8 devices and 7 heads except 1
  cfg.model.hidden_size = 7 * 64;
  const cost::CostModel odd = model_of(cfg);
  UlyssesResult r = simulate_ulysses(odd, cfg, lengths);
  EXPECT_EQ(r.setting.sp_degree, 1);
}

}  // namespace
}  // namespace infinipipe::sim
