#include <gtest/gtest.h>

#include <array>
#include <random>

#include "plan/recompute.h"
#include "plan/schedule.h"
#include "plan/schedule_memory.h"
#include "plan/schedule_replay.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using testing::stage_params;

using testing::plan_random;
using testing::small_config;

// Parameters a stage holds (its layers, the embedding table, final norm and LM head).
// Optimizer state (bf16: master weights + Adam m, v = 12 of 18 bytes per parameter) is sharded
// over the Ulysses group of a stage; data-parallel replicas keep full copies, as `train` does.
TEST(ScheduleMemory, OptimizerShardedOverTheUlyssesGroupOnly) {
  for (int64_t u : {1, 2, 8})
    for (int64_t dp : {1, 4}) {
      Config cfg = small_config(4, 1, 16);
      cfg.model.num_attention_heads = 8;
      cfg.training.bf16 = true;
      cfg.parallel.ulysses_degree = u;
      cfg.parallel.data_parallel = dp;
      cfg.cluster.num_devices = 4 * u * dp;
      cfg.cluster.devices_per_node = 4 * u * dp;
      const auto cm = cost::CostModel::from_config(cfg);
      Plan p = testing::plan_equal_chunks(cfg, 6);
      schedule_1f1b(p);
      const MemoryTrace t = schedule_memory_trace(p, cm, cfg);
      for (int32_t r = 0; r < 4; ++r) {
        const double params = stage_params(cfg.model, p.stages[r]);
        const double want = params * 6.0 + params * 12.0 / static_cast<double>(u);
        EXPECT_NEAR(static_cast<double>(t.static_bytes[r]), want, 1.0)
            << "u " << u << " dp " << dp << " rank " << r;
        EXPECT_EQ(t.static_bytes[r], plan_static_bytes(p, cm, cfg, r));
      }
      const MemoryContext mem = plan_memory_context(cfg, 1);
      EXPECT_EQ(mem.zero_shard, u > 1);
      EXPECT_EQ(mem.dp, 1);
    }
}

// A forward's temporaries (and a block of logits on the last stage) are part of its peak: the
// trace's `during` of every forward is `after` plus forward_transient_bytes, plus the message the
// rank's previous action sent (still in flight), on random batches.
TEST(ScheduleMemory, ForwardPeakIncludesItsTransientBytes) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 10; ++trial) {
    Config cfg = small_config(1 << (trial % 4));
    const auto cm = cost::CostModel::from_config(cfg);
    Plan p = plan_random(cfg, rng, 8 + trial);
    schedule_build(p, trial % 2 ? Schedule::epp : Schedule::gpipe);
    const MemoryTrace t = schedule_memory_trace(p, cm, cfg);
    for (int32_t r = 0; r < p.pp; ++r)
      for (size_t i = 0; i < p.actions[r].size(); ++i) {
        const Action& a = p.actions[r][i];
        if (a.kind != ActionKind::forward) continue;
        const int64_t fwd =
            cm.forward_transient_bytes(p.chunks[a.chunk].shapes(), stage_shape(p.stages[a.stage]));
        EXPECT_GT(fwd, 0);
        const Action* prev = i > 0 ? &p.actions[r][i - 1] : nullptr;
        const int64_t sent =
            prev ? action_send_bytes(p, *prev, cm, p.chunks[prev->chunk].shapes()) : 0;
        EXPECT_EQ(sent > 0,
                  prev != nullptr && (prev->kind == ActionKind::forward
                                          ? prev->stage + 1 < static_cast<int32_t>(p.stages.size())
                                          : prev->stage > 0));
        EXPECT_EQ(t.steps[r][i].during, t.steps[r][i].after + fwd + sent);
        EXPECT_GE(t.peak[r], t.steps[r][i].during);
      }
    // The recompute problem sees the same points.
    const auto pb = recompute_problem(p, cm, plan_memory_context(cfg, 0), RecomputeTie::none);
    EXPECT_EQ(recompute_peaks(pb, std::vector<int32_t>(pb.group_max.size(), 0)), t.peak);
  }
}

// Messages in flight (send_hold_start): never fewer than the previous action's, the window only
// moves forward, and the trace carries exactly the sends of the window on top of each action.
TEST(ScheduleMemory, MessagesInFlightFollowTheUnitReplay) {
  std::mt19937 rng(29);
  int64_t several = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int32_t pp = 2 + trial % 6;
    Config cfg = small_config(pp, 1, 2 * pp);
    const auto cm = cost::CostModel::from_config(cfg);
    Plan p = plan_random(cfg, rng, 6 + trial);
    schedule_build(p, std::array{Schedule::epp, Schedule::one_f_one_b, Schedule::gpipe,
                                 Schedule::seq1f1b}[trial % 4]);
    const auto hold = send_hold_start(p);
    const auto flight = in_flight_bytes(p, cm);
    for (int32_t r = 0; r < pp; ++r) {
      for (size_t i = 0; i < p.actions[r].size(); ++i) {
        const int32_t h = hold[r][i];
        EXPECT_LE(h, std::max<int32_t>(0, static_cast<int32_t>(i) - 1));
        if (i > 0) {
          EXPECT_GE(h, hold[r][i - 1]);
        }
        int64_t want = 0;
        for (int32_t j = h; j < static_cast<int32_t>(i); ++j) {
          const Action& a = p.actions[r][j];
          want += action_send_bytes(p, a, cm, p.chunks[a.chunk].shapes());
        }
        EXPECT_EQ(flight[r][i], want);
        if (h + 1 < static_cast<int32_t>(i)) ++several;
      }
    }
  }
  // Pipelines do hold several: the old one-message allowance under-counted them.
  EXPECT_GT(several, 0);
}

// A sequence in three slices on one stage, forwards then backwards: the tail's backward allocates
// dK/dV for the 2a tokens before it; the middle slice's accumulates into that buffer (it holds
// its a tokens of context) and allocates nothing, as the engine does (tests/profile); the first
// slice's frees it. Charging the middle slice a second buffer left 512K-token sequences no K
// that fits (issue 42's replica balance). The recompute problem sees the same peaks.
TEST(ScheduleMemory, SlicesAccumulateDkvInTheBufferTheirLaterSliceLeft) {
  const Config cfg = small_config(1);
  const auto cm = cost::CostModel::from_config(cfg);
  const int64_t a = 1024;
  Plan p = testing::plan_from_chunks(cfg, {3 * a}, {{{0, 0, a}}, {{0, a, a}}, {{0, 2 * a, a}}});
  schedule_build(p, Schedule::gpipe);
  ASSERT_EQ(p.actions[0].size(), 6u);
  const cost::StageShape st = stage_shape(p.stages[0]);
  auto dkv = [&](int c) { return cm.dkv_buffer_bytes(p.chunks[c].shapes(), st); };
  auto transient = [&](int c) { return cm.backward_transient_bytes(p.chunks[c].shapes(), st, 0); };
  EXPECT_EQ(dkv(2), 2 * dkv(1));
  EXPECT_EQ(dkv(0), 0);
  const MemoryTrace t = schedule_memory_trace(p, cm, cfg);
  const auto& steps = t.steps[0];
  // Backwards in reverse slice order: actions 3 (tail), 4 (middle), 5 (first).
  ASSERT_EQ(p.actions[0][3].chunk, 2);
  ASSERT_EQ(p.actions[0][4].chunk, 1);
  EXPECT_EQ(steps[3].during, steps[2].after + dkv(2) + transient(2));
  EXPECT_EQ(steps[4].during, steps[3].after + transient(1));
  EXPECT_EQ(steps[5].during, steps[4].after + transient(0));
  // After each backward the buffer is the next backward's context: 2a, then a, then none.
  const int64_t held_tail = steps[2].after - steps[1].after;
  EXPECT_EQ(steps[3].after, steps[2].after - held_tail + dkv(2));
  EXPECT_EQ(steps[5].after, t.static_bytes[0]);
  const auto pb = recompute_problem(p, cm, plan_memory_context(cfg, 0), RecomputeTie::none);
  EXPECT_EQ(recompute_peaks(pb, std::vector<int32_t>(pb.group_max.size(), 0)), t.peak);
}

// A forward builds each layer's whole stash before it drops a recomputed one, so recomputing
// every layer of a stage peaks like recomputing all but one; the recompute problem agrees.
TEST(ScheduleMemory, ForwardRecomputingEveryLayerPeaksLikeKeepingOne) {
  Config cfg = small_config(2);
  const auto cm = cost::CostModel::from_config(cfg);
  Plan p = testing::plan_equal_chunks(cfg, 4);
  schedule_1f1b(p);
  const MemoryTrace keep_one = [&] {
    Plan q = p;
    for (auto& list : q.actions)
      for (Action& a : list) a.recompute_layers = q.stages[a.stage].num_layers - 1;
    return schedule_memory_trace(q, cm, cfg);
  }();
  for (auto& list : p.actions)
    for (Action& a : list) a.recompute_layers = p.stages[a.stage].num_layers;
  const MemoryTrace all = schedule_memory_trace(p, cm, cfg);
  for (int32_t r = 0; r < p.pp; ++r)
    for (size_t i = 0; i < p.actions[r].size(); ++i) {
      if (p.actions[r][i].kind != ActionKind::forward) continue;
      EXPECT_LT(all.steps[r][i].after, keep_one.steps[r][i].after);
      // Chunks in flight before this forward hold less, so `during` can only be lower or equal.
      EXPECT_LE(all.steps[r][i].during, keep_one.steps[r][i].during);
      if (i == 0) {
        EXPECT_EQ(all.steps[r][i].during, keep_one.steps[r][i].during);
      }
    }
  const auto pb = recompute_problem(p, cm, plan_memory_context(cfg, 0), RecomputeTie::none);
  std::vector<int32_t> every(pb.group_max.size());
  for (size_t g = 0; g < every.size(); ++g) every[g] = pb.group_max[g];
  EXPECT_EQ(recompute_peaks(pb, every), all.peak);
}

}  // namespace
}  // namespace infinipipe::plan
