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

// One ring collective over n devices of one span, from the table's row (a group with one device
// per node when across nodes: one NIC share).
double ring(const cost::CostModel& cm, cost::Collective op, int64_t n, bool inter, double bytes) {
  const cost::CollectiveCost& r = cm.coefficients().collectives.row(op, inter);
  const double k = static_cast<double>(n);
  return r.call_latency_s + (k - 1) * r.step_latency_s + (k - 1) / k * bytes / r.bus_bandwidth;
}

TEST(Megatron, TensorParallelCollectivesInClosedForm) {
  const Config cfg = small_cluster(2, 2);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> batch = {8192};
  const BaselineResult r = simulate_megatron(cm, cfg, batch, {2, 1, 0, 0});
  // 2 all-gathers + 2 reduce-scatters of 8192 x 1024 bf16 per layer and pass, half of it sent.
  const double bytes = 8192.0 * 1024 * 2;
  const double collective = 2 * (ring(cm, cost::Collective::all_gather, 2, false, bytes) +
                                 ring(cm, cost::Collective::reduce_scatter, 2, false, bytes));
  const double tp = collective * 2 * 4;      // forward + backward, 4 layers, no recompute
  EXPECT_NEAR(r.comm_exposed_s, tp, 1e-12);  // dp 1: no gradient reduce-scatter
  const cost::CostModel g = cm.with_ulysses_degree(2, 0);
  const std::vector<cost::SliceShape> chunk = {{0, 8192}};
  const double a2a = g.ulysses_alltoall_time(8192) * 8;
  EXPECT_NEAR(r.compute_time_s, g.forward_time(chunk, kAll) + g.backward_time(chunk, kAll) - a2a,
              1e-12);
  const double shard = static_cast<double>(cm.model().params_total()) / 2;
  EXPECT_NEAR(r.step_time_s, r.compute_time_s + r.comm_exposed_s + r.optimizer_time_s, 1e-12);
  // dp 1, cp 1: ZeRO-1 has one replica to shard over, so every byte of the states stays.
  EXPECT_NEAR(static_cast<double>(r.peak_memory_bytes),
              static_cast<double>(g.activation_bytes(chunk, kAll, 0) +
                                  std::max(g.forward_transient_bytes(chunk, kAll),
                                           g.backward_transient_bytes(chunk, kAll, 0))) +
                  shard * cm.coefficients().bytes_per_param,
              2.0);
  EXPECT_NEAR(r.parts.total(), r.step_time_s, 1e-12);
}

// ZeRO-1 (Megatron's distributed optimizer, the paper's §V-A): over the dp x cp replicas the
// optimizer state is sharded, and the step ends with a reduce-scatter of the fp32 gradients and
// an all-gather of the bf16 parameters instead of an all-reduce.
TEST(Megatron, DistributedOptimizerShardsTheStateOverReplicas) {
  Config cfg = small_cluster(4, 4);
  cfg.model.seq_length = 8192;  // one sequence per micro-batch
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> batch = {8192, 8192, 8192, 8192};
  const BaselineResult one = simulate_megatron(cm, cfg, batch, {4, 1, 0, 0});   // dp 1
  const BaselineResult four = simulate_megatron(cm, cfg, batch, {1, 1, 0, 0});  // dp 4
  const cost::Coefficients& c = cm.coefficients();
  const double params = static_cast<double>(cm.model().params_total());
  const double states = params * (c.bytes_per_param - c.optimizer_bytes_per_param) +
                        params / 4 * c.optimizer_bytes_per_param;
  const cost::CostModel g = cm.with_ulysses_degree(1, 0);
  const std::vector<cost::SliceShape> chunk = {{0, 8192}};
  const double act = static_cast<double>(
      g.activation_bytes(chunk, kAll, 0) +
      std::max(g.forward_transient_bytes(chunk, kAll), g.backward_transient_bytes(chunk, kAll, 0)));
  EXPECT_NEAR(static_cast<double>(four.peak_memory_bytes), states + act, 2.0);
  EXPECT_NEAR(four.parts.zero,
              ring(cm, cost::Collective::reduce_scatter, 4, false, params * 4) +
                  ring(cm, cost::Collective::all_gather, 4, false, params * 2),
              1e-9);
  EXPECT_EQ(one.parts.zero, 0.0);  // nothing to shard over
  EXPECT_NEAR(four.optimizer_time_s, optimizer_seconds(cm, params / 4), 1e-12);
  EXPECT_NEAR(four.parts.total(), four.step_time_s, 1e-12);
}

TEST(Megatron, ContextParallelRingHidesOnlyBehindAttention) {
  Config cfg = small_cluster(2, 1);        // cp 2 across two nodes of one device
  cfg.cluster.inter_node_bandwidth = 1e8;  // a slow link: the ring outlasts attention
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> batch = {8192};
  const BaselineResult r = simulate_megatron(cm, cfg, batch, {1, 2, 1, 0});
  const cost::CostModel g = cm.with_ulysses_degree(2, 0);
  const std::vector<cost::SliceShape> chunk = {{0, 8192}};
  const double kv = 4096.0 * 2 * 1024 * 2;  // local K/V: 4096 tokens x 2 x kv dim, bf16
  const double step =
      kv / 1e8 +
      cm.coefficients().collectives.row(cost::Collective::send_recv, true).call_latency_s;
  const double attn = g.attention_seconds(chunk);
  const double kb = g.coefficients().backward_factor;
  const double cp = 4 * ((step - attn) + (2 * step - kb * attn)) + 1 * (step - attn);
  // ZeRO-1 over the 2 cp ranks: fp32 gradients reduce-scattered, bf16 parameters all-gathered.
  const double params = static_cast<double>(cm.model().params_total());
  const double zero1 = ring(cm, cost::Collective::reduce_scatter, 2, true, params * 4) +
                       ring(cm, cost::Collective::all_gather, 2, true, params * 2);
  EXPECT_NEAR(r.comm_exposed_s, cp + zero1, 1e-9);
  EXPECT_NEAR(r.parts.bubble_p2p, cp, 1e-9);
  EXPECT_NEAR(r.parts.zero, zero1, 1e-9);
  EXPECT_GT(step, kb * attn);  // the closed form above assumed every max() picks the ring
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
  const cost::CostModel g = cm.with_ulysses_degree(2, 0);
  const std::vector<cost::SliceShape> chunk = {{0, 8192}};
  const double a2a = g.ulysses_alltoall_time(8192) * (2 * 4 + 4);
  const double compute =
      g.forward_time(chunk, kAll) + g.backward_time(chunk, kAll) + g.recompute_time(chunk, 4) - a2a;
  // DeepSpeed's buckets (tests/sim/test_baseline_fsdp.cc).
  const double zero = zero3_micro_batch_exposed(g, cfg, chunk, kDeepSpeedReduceBucketParams);
  EXPECT_NEAR(r.compute_time_s, compute, 1e-12);
  EXPECT_NEAR(r.comm_exposed_s, a2a + zero, 1e-12);
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
  const SpMicroBatch mb = sp_micro_batch(cm, cfg, 4, chunk, 0, kDeepSpeedReduceBucketParams);
  const cost::CostModel g = cm.with_ulysses_degree(4, 0);
  const double a2a = g.ulysses_alltoall_time(8192) * 8;
  const double even = g.forward_time(chunk, kAll) + g.backward_time(chunk, kAll) - a2a;
  const double attn = g.attention_seconds(chunk) * 4 * (1 + g.coefficients().backward_factor);
  EXPECT_NEAR(mb.compute, even + attn / 3, 1e-12);
  EXPECT_THROW(simulate_deepspeed(cm, cfg, std::vector<int64_t>{4096}, {8, -1, 0}), ConfigError);
}

// A hand-built plan of two micro-batches on 16 devices: in the first, group A (8 devices) gets
// the long sequence and B the short; in the second the other way round. Lock step: each
// micro-batch waits for its slowest group, so the step is the sum of the two slowest, which is
// more than either group's own total (what groups running free of each other would take).
TEST(FlexSp, StepIsTheSumOfEachMicroBatchsSlowestGroup) {
  Config cfg = small_cluster(16, 8);
  cfg.model.seq_length = 65536;
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> batch = {32768, 2048, 30720, 4096};
  const std::vector<std::vector<FlexSpGroup>> plan = {
      {{.size = 8, .lengths = {32768}}, {.size = 8, .lengths = {2048}}},
      {{.size = 8, .lengths = {4096}}, {.size = 8, .lengths = {30720}}}};
  const FlexSpSetting setting{.recompute_layers = 1, .extra_micro_batches = 4};
  const FlexSpResult f = flexsp_evaluate(cm, cfg, batch, plan, setting);
  ASSERT_FALSE(f.result.oom) << f.result.reason;
  ASSERT_EQ(f.micro_batches.size(), 2u);
  auto alone = [&](int64_t len) {  // one group's time for one sequence, from the DeepSpeed model
    const std::vector<cost::SliceShape> chunk = {{0, len}};
    const SpMicroBatch mb = sp_micro_batch(cm, cfg, 8, chunk, 1, 0);
    return std::pair{mb.compute + mb.alltoall, mb.compute};
  };
  double want = optimizer_seconds(cm, static_cast<double>(cm.model().params_total()) / 16);
  double group_a = 0, group_b = 0;
  for (const auto& [slow, fast] : {std::pair{32768, 2048}, std::pair{30720, 4096}}) {
    const std::vector<cost::SliceShape> chunk = {{0, slow}};
    want += alone(slow).first + zero3_micro_batch_exposed(cm.with_ulysses_degree(8, 0), cfg, chunk);
    EXPECT_LT(alone(fast).first, alone(slow).first);
  }
  group_a = alone(32768).first + alone(4096).first;
  group_b = alone(2048).first + alone(30720).first;
  EXPECT_NEAR(f.result.step_time_s, want, 1e-9 * want);
  EXPECT_GT(f.result.step_time_s - f.result.optimizer_time_s, std::max(group_a, group_b));
  EXPECT_NEAR(f.result.parts.total(), f.result.step_time_s, 1e-12);
  EXPECT_EQ(f.micro_batches[0].slowest, 0u);
  EXPECT_EQ(f.micro_batches[1].slowest, 1u);
}

TEST(FlexSp, HandBuiltPlansMustCoverTheDevicesAndTheBatch) {
  const Config cfg = small_cluster(16, 8);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> batch = {4096, 2048};
  const FlexSpSetting s;
  using Plan = std::vector<std::vector<FlexSpGroup>>;
  EXPECT_THROW(flexsp_evaluate(cm, cfg, batch, Plan{{{8, {4096, 2048}}, {4, {}}}}, s),
               ConfigError);  // 12 of 16 devices
  EXPECT_THROW(flexsp_evaluate(cm, cfg, batch, Plan{{{12, {4096, 2048}}, {4, {}}}}, s),
               ConfigError);  // 12 is no power of two
  EXPECT_THROW(flexsp_evaluate(cm, cfg, batch, Plan{{{8, {4096}}, {8, {}}}}, s),
               ConfigError);  // a sequence left out
  const FlexSpResult f = flexsp_evaluate(cm, cfg, batch, Plan{{{8, {4096}}, {8, {2048}}}}, s);
  EXPECT_EQ(f.micro_batches.at(0).groups.size(), 2u);
}

// FlexSP's cut of the batch (sorted, consecutive runs): every sequence once, longest first, and
// no other cut into m consecutive runs has a smaller largest run.
TEST(FlexSp, MicroBatchCutIsTheBalancedConsecutiveOne) {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> len(1, 5000);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> batch(9);
    for (int64_t& x : batch) x = len(rng);
    const int64_t m = 1 + trial % 4;
    const auto mbs = flexsp_micro_batches(batch, m);
    ASSERT_EQ(static_cast<int64_t>(mbs.size()), m);
    std::vector<int64_t> flat;
    int64_t worst = 0;
    for (const auto& mb : mbs) {
      ASSERT_FALSE(mb.empty());
      int64_t sum = 0;
      for (int64_t x : mb) flat.push_back(x), sum += x;
      worst = std::max(worst, sum);
    }
    std::vector<int64_t> sorted = batch;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    EXPECT_EQ(flat, sorted);
    // Every cut of the 9 sorted sequences into m runs (bit masks of the 8 gaps).
    int64_t best = INT64_MAX;
    for (int mask = 0; mask < 256; ++mask) {
      if (__builtin_popcount(mask) != m - 1) continue;
      int64_t run = 0, most = 0;
      for (int i = 0; i < 9; ++i) {
        run += sorted[static_cast<size_t>(i)];
        if (i == 8 || (mask >> i & 1)) most = std::max(most, run), run = 0;
      }
      best = std::min(best, most);
    }
    EXPECT_EQ(worst, best) << trial;
  }
}

// FlexSP's search: never below its lower bound; its plan, timed again by hand, gives its step;
// trying M_min .. M_min + 4 is never slower than M_min alone.
TEST(FlexSp, SearchIsConsistentAndTriesMoreMicroBatchCounts) {
  Config cfg = small_cluster(16, 8);
  cfg.model.seq_length = 65536;
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> len(8.0, 1.5);
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<int64_t> batch;
    for (int i = 0; i < 48; ++i)
      batch.push_back(std::clamp<int64_t>(static_cast<int64_t>(len(rng)), 64, 65536));
    const FlexSpResult only_min = simulate_flexsp(cm, cfg, batch, {0, 0});
    const FlexSpResult best = simulate_flexsp(cm, cfg, batch, {0, 4});
    ASSERT_FALSE(best.result.oom) << best.result.reason;
    EXPECT_GE(best.result.step_time_s, best.lower_bound_s * (1 - 1e-9)) << trial;
    EXPECT_LE(best.result.step_time_s, only_min.result.step_time_s * (1 + 1e-12)) << trial;
    EXPECT_EQ(static_cast<int64_t>(only_min.micro_batches.size()), only_min.min_micro_batches);
    EXPECT_NEAR(best.result.parts.total(), best.result.step_time_s, 1e-9);
    std::vector<std::vector<FlexSpGroup>> plan;
    for (const FlexSpMicroBatch& mb : best.micro_batches) plan.push_back(mb.groups);
    const FlexSpResult again = flexsp_evaluate(cm, cfg, batch, plan, {0, 4});
    EXPECT_NEAR(again.result.step_time_s, best.result.step_time_s, 1e-12) << trial;
  }
}

}  // namespace
}  // namespace infinipipe::sim
