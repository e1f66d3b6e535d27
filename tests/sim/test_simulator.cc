#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "plan/schedule.h"
#include "plan/schedule_memory.h"
#include "plan/test_plan_util.h"
#include "plan/validate.h"
#include "sim/compare.h"
#include "sim/simulator.h"

namespace infinipipe::sim {
namespace {

using plan::testing::plan_equal_chunks;
using plan::testing::set_uniform_times;
using plan::testing::small_config;

TEST(Simulator, OneFOneBBubbleMatchesClosedFormWithFreeComms) {
  for (int pp : {2, 4, 8})
    for (int m : {1, 4, 8, 13}) {
      Config cfg = small_config(pp);
      auto cost = cost::CostModel::from_config(cfg);
      plan::Plan p = plan_equal_chunks(cfg, m);
      plan::schedule_1f1b(p);
      set_uniform_times(p, 0.5, 1.0);
      StepResult r = simulate(p, cost, cfg, {.ignore_comms = true});
      const double expect = double(pp - 1) / (m + pp - 1);
      for (int k = 0; k < pp; ++k) {
        EXPECT_NEAR(r.bubble_ratio[k], expect, 1e-12) << "pp " << pp << " m " << m;
        EXPECT_NEAR(r.busy_time[k], m * 1.5, 1e-12);
      }
      EXPECT_NEAR(r.bubble_ratio_mean, expect, 1e-12);
      EXPECT_NEAR(r.step_time, (m + pp - 1) * 1.5, 1e-9);
    }
}

TEST(Simulator, CommunicationCostsTimeAndInterNodeCostsMore) {
  Config cfg = small_config(4);
  auto cost = cost::CostModel::from_config(cfg);
  plan::Plan p = plan_equal_chunks(cfg, 8, 2048);
  plan::schedule_1f1b(p);
  plan::plan_predict(p, cost, cfg);
  StepResult free = simulate(p, cost, cfg, {.ignore_comms = true});
  StepResult intra = simulate(p, cost, cfg);
  Config spread = cfg;
  spread.cluster.devices_per_node = 1;  // every pipeline rank on its own node
  StepResult inter = simulate(p, cost, spread);
  EXPECT_GT(intra.step_time, free.step_time);
  EXPECT_GT(inter.step_time, intra.step_time);
  // A transfer delays the receiver by exactly the cost model's p2p time: the first forward on
  // rank 1 starts when rank 0's ends plus one transfer.
  double xfer = cost.p2p_time(cost.p2p_bytes(p.chunks[0].shapes()), false);
  EXPECT_NEAR(intra.actions[1][0].start, intra.actions[0][0].end + xfer, 1e-12);
  EXPECT_EQ(intra.source, "simulator");
}

TEST(Simulator, PeakMemoryGpipeHoldsAllChunksOneFOneBHoldsPpMinusS) {
  const int pp = 4, m = 8;
  Config cfg = small_config(pp);
  auto cost = cost::CostModel::from_config(cfg);
  plan::Plan g = plan_equal_chunks(cfg, m), f = g;
  plan::schedule_gpipe(g);
  plan::schedule_1f1b(f);
  StepResult rg = simulate(g, cost, cfg), rf = simulate(f, cost, cfg);
  auto sh = g.chunks[0].shapes();
  for (int s = 0; s < pp; ++s) {
    auto st = plan::stage_shape(g.stages[s]);
    int64_t base = plan::plan_static_bytes(g, cost, cfg, s);
    int64_t act = cost.activation_bytes(sh, st, 0), tr = cost.backward_transient_bytes(sh, st, 0);
    // At the first backward, the last forward's output is still on its way (but on the last stage).
    const int64_t sent = s + 1 < pp ? cost.p2p_bytes(sh) : 0;
    EXPECT_EQ(rg.peak_bytes[s], base + m * act + tr + sent) << "stage " << s;
    EXPECT_EQ(rf.peak_bytes[s], base + (pp - s) * act + tr + sent) << "stage " << s;
  }
  // The curve starts and ends at the static bytes.
  EXPECT_EQ(rf.memory[0].front().bytes, plan::plan_static_bytes(f, cost, cfg, 0));
  EXPECT_EQ(rf.memory[0].back().bytes, rf.memory[0].front().bytes);
  g.memory_budget = rg.peak_bytes[0] - 1;
  EXPECT_TRUE(simulate(g, cost, cfg).oom);
}

TEST(Simulator, MfuAndHfu) {
  Config cfg = small_config(2);
  auto cost = cost::CostModel::from_config(cfg);
  plan::Plan p = plan_equal_chunks(cfg, 4, 4096);
  plan::schedule_1f1b(p);
  plan::plan_predict(p, cost, cfg);
  StepResult r = simulate(p, cost, cfg);
  EXPECT_GT(r.mfu, 0.0);
  EXPECT_LT(r.mfu, 1.0);
  EXPECT_DOUBLE_EQ(r.hfu, r.mfu);  // nothing recomputed
  double fwd = 0;
  for (const auto& c : p.chunks) fwd += cost.flops(c.shapes(), cfg.model.num_layers, true);
  EXPECT_DOUBLE_EQ(r.model_flops, 3 * fwd);
  EXPECT_NEAR(r.tokens_per_second, 4 * 4096 / r.step_time, 1e-6);
  for (auto& list : p.actions)
    for (auto& a : list) a.recompute_layers = static_cast<int32_t>(p.stages[a.stage].num_layers);
  plan::plan_predict(p, cost, cfg);
  StepResult rc = simulate(p, cost, cfg);
  EXPECT_GT(rc.hfu, rc.mfu);
  EXPECT_GT(rc.step_time, r.step_time);          // recompute costs time
  EXPECT_LT(rc.peak_bytes[0], r.peak_bytes[0]);  // and saves memory
  for (const auto& rec : rc.actions[0]) {
    if (rec.action.kind == plan::ActionKind::backward) {
      EXPECT_GT(rec.recompute_time, 0);
    }
  }
}

TEST(Simulator, DataParallelGradientSyncEndsTheStep) {
  Config cfg = small_config(4);
  auto cost = cost::CostModel::from_config(cfg);
  plan::Plan p = plan_equal_chunks(cfg, 6, 2048);
  plan::schedule_1f1b(p);
  plan::plan_predict(p, cost, cfg);
  StepResult one = simulate(p, cost, cfg);
  for (double t : one.dp_sync_time) EXPECT_EQ(t, 0.0);
  Config dp = cfg;
  dp.parallel.data_parallel = 2;
  dp.cluster.num_devices = 8;
  dp.cluster.devices_per_node = 8;
  StepResult two = simulate(p, cost, dp);
  double expect = 0;
  for (int k = 0; k < 4; ++k) {
    int64_t params = p.stages[k].num_layers * cfg.model.params_per_layer();
    if (k == 0) params += cfg.model.params_embedding();
    if (k == 3) params += cfg.model.hidden_size + cfg.model.params_embedding();
    EXPECT_DOUBLE_EQ(two.dp_sync_time[k],
                     cost.collective_time(cost::Collective::all_reduce, {2 * k, 2, 8},
                                          static_cast<double>(4 * params)));
    expect = std::max(expect, one.actions[k].back().end + two.dp_sync_time[k]);
  }
  EXPECT_DOUBLE_EQ(two.step_time, expect);
  EXPECT_GT(two.step_time, one.step_time);
}

TEST(Simulator, CompareAgainstAnotherExecution) {
  Config cfg = small_config(2);
  auto cost = cost::CostModel::from_config(cfg);
  plan::Plan p = plan_equal_chunks(cfg, 4, 1024);
  plan::schedule_1f1b(p);
  plan::plan_predict(p, cost, cfg);
  StepResult pred = simulate(p, cost, cfg);
  // A "measured" run where every backward took twice as long.
  plan::Plan slow = p;
  for (auto& list : slow.actions)
    for (auto& a : list)
      if (a.kind == plan::ActionKind::backward) a.predicted_time *= 2;
  StepResult meas = simulate(slow, cost, cfg);
  meas.source = "runtime";
  StepComparison c = step_compare(pred, meas);
  EXPECT_DOUBLE_EQ(c.forward_ratio, 1.0);
  EXPECT_NEAR(c.backward_ratio, 2.0, 1e-12);
  EXPECT_NEAR(c.worst_action_ratio, 2.0, 1e-12);
  EXPECT_GT(c.step_time_ratio, 1.0);
  EXPECT_NE(c.table().find("backward 2.000"), std::string::npos) << c.table();
  meas.actions[1].pop_back();
  EXPECT_THROW(step_compare(pred, meas), Error);
}

TEST(Simulator, DeadlockIsAnError) {
  Config cfg = small_config(4);
  auto cost = cost::CostModel::from_config(cfg);
  plan::Plan p = plan_equal_chunks(cfg, 6);
  plan::schedule_1f1b(p);
  std::swap(p.actions[0][2], p.actions[0][4]);
  EXPECT_THROW(simulate(p, cost, cfg), Error);
}

TEST(Simulator, MalformedPlanIsAnErrorNotACrash) {
  Config cfg = small_config(4);
  auto cost = cost::CostModel::from_config(cfg);
  plan::Plan p = plan_equal_chunks(cfg, 6);
  plan::schedule_1f1b(p);
  plan::Plan a = p, b = p, c = p;
  a.actions[2].pop_back();
  b.actions.pop_back();
  c.actions[1][0].chunk = 99;
  for (const plan::Plan* q : {&a, &b, &c}) {
    try {
      simulate(*q, cost, cfg);
      ADD_FAILURE() << "expected an Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot simulate the 1f1b plan"), std::string::npos);
    }
  }
}

// A large random plan (512 sequences, pp 8) simulates to the replay's step time; its latency is
// measured in bench/planner_latency.sh, not asserted here.
TEST(Simulator, Simulates512SequencesOnPp8AsTheReplay) {
  Config cfg = small_config(8, 1, 32);
  auto cost = cost::CostModel::from_config(cfg);
  std::mt19937 rng(5);
  plan::Plan p = plan::testing::plan_random(cfg, rng, 512);
  plan::schedule_epp(p);
  plan::plan_predict(p, cost, cfg);
  auto v = plan::validate(p, cost, cfg);
  StepResult r = simulate(p, cost, cfg);
  EXPECT_TRUE(v.ok()) << v.message();
  EXPECT_GT(r.step_time, 0);
  EXPECT_NEAR(r.step_time, p.predicted_step_time, 1e-9 * p.predicted_step_time);
}

}  // namespace
}  // namespace infinipipe::sim
