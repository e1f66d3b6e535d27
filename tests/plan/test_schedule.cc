#include <gtest/gtest.h>

#include <random>

#include "core/error.h"

#include "plan/schedule.h"
#include "plan/schedule_memory.h"
#include "plan/schedule_replay.h"
#include "plan/schedule_table.h"
#include "plan/validate.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using testing::plan_equal_chunks;
using testing::plan_random;
using testing::set_uniform_times;
using testing::small_config;

// Most chunks between forward and backward on `rank` at any point.
int max_in_flight(const Plan& p, int32_t rank, int32_t stage) {
  int live = 0, most = 0;
  for (const Action& a : p.actions[rank]) {
    if (a.stage != stage) continue;
    live += a.kind == ActionKind::forward ? 1 : -1;
    most = std::max(most, live);
  }
  return most;
}

double bubble_ratio(const Plan& p, const Replay& r, int32_t rank) {
  double busy = 0;
  for (const auto& t : r.timing[rank]) busy += t.end - t.start;
  (void)p;
  return 1.0 - busy / r.step_time;
}

TEST(Schedule, OneFOneBBubbleMatchesClosedForm) {
  for (int pp : {2, 4, 8})
    for (int m : {1, 3, 8, 17}) {
      Config cfg = small_config(pp);
      Plan p = plan_equal_chunks(cfg, m);
      schedule_1f1b(p);
      set_uniform_times(p, 1.0, 2.0);
      Replay r = schedule_replay(p, {});
      ASSERT_FALSE(r.deadlock) << r.deadlock_reason;
      const double expect = double(pp - 1) / (m + pp - 1);
      for (int rank = 0; rank < pp; ++rank)
        EXPECT_NEAR(bubble_ratio(p, r, rank), expect, 1e-12) << "pp " << pp << " m " << m;
      EXPECT_NEAR(r.step_time, (m + pp - 1) * 3.0, 1e-9);
    }
}

TEST(Schedule, InFlightClosedForms) {
  for (int pp : {2, 4, 8})
    for (int m : {2, 5, 16}) {
      Config cfg = small_config(pp);
      Plan g = plan_equal_chunks(cfg, m), f = g;
      schedule_gpipe(g);
      schedule_1f1b(f);
      for (int s = 0; s < pp; ++s) {
        EXPECT_EQ(max_in_flight(g, s, s), m);
        EXPECT_EQ(max_in_flight(f, s, s), std::min(m, pp - s)) << "pp " << pp << " m " << m;
      }
    }
}

TEST(Schedule, InterleavedBubbleMatchesMegatron) {
  // Megatron-LM: with v virtual stages the bubble shrinks to (p-1)/(v*m + p-1) (m divisible by p).
  for (int pp : {2, 4})
    for (int vpp : {2, 4})
      for (int m : {pp, 2 * pp, 4 * pp}) {
        Config cfg = small_config(pp, vpp, 16);
        Plan p = plan_equal_chunks(cfg, m);
        schedule_interleaved(p);
        set_uniform_times(p, 1.0 / vpp, 2.0 / vpp);
        Replay r = schedule_replay(p, {});
        ASSERT_FALSE(r.deadlock) << r.deadlock_reason;
        const double expect = double(pp - 1) / (vpp * m + pp - 1);
        for (int rank = 0; rank < pp; ++rank)
          EXPECT_NEAR(bubble_ratio(p, r, rank), expect, 1e-9)
              << "pp " << pp << " vpp " << vpp << " m " << m;
      }
}

// Megatron's micro-batch group rule (remainder 0 or >= pp) lets any m >= pp run without a
// deadlock; pp 4, vpp 3, m = 5 or 9 deadlocks with groups of pp (remainder 1).
TEST(Schedule, InterleavedAnyChunkCountAtLeastPp) {
  for (int vpp : {2, 3})
    for (int m : {4, 5, 6, 7, 9, 11, 13}) {
      Config cfg = small_config(4, vpp, 4 * vpp);
      Plan p = plan_equal_chunks(cfg, m);
      schedule_interleaved(p);
      for (const auto& list : p.actions) EXPECT_EQ(list.size(), size_t(2 * m * vpp));
      auto cost = cost::CostModel::from_config(cfg);
      ValidationResult v = validate(p, cost, cfg);
      EXPECT_TRUE(v.ok()) << "vpp " << vpp << " m " << m << ": " << v.message();
    }
}

TEST(Schedule, InterleavedPassesValidationOnRandomBatches) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 30; ++trial) {
    int pp = 2 + trial % 3, vpp = 2 + (trial / 3) % 2;
    int m = std::uniform_int_distribution<int>(pp, 4 * pp)(rng);
    Config cfg = small_config(pp, vpp, 2 * pp * vpp);
    auto cost = cost::CostModel::from_config(cfg);
    std::vector<int64_t> lens(m);
    std::vector<std::vector<testing::SliceSpec>> chunks;
    for (int i = 0; i < m; ++i) {
      lens[i] = std::uniform_int_distribution<int64_t>(64, 4096)(rng);
      chunks.push_back({{i, 0, lens[i]}});
    }
    Plan p = testing::plan_from_chunks(cfg, lens, chunks);
    schedule_build(p, Schedule::interleaved);
    plan_predict(p, cost, cfg);
    ValidationResult v = validate(p, cost, cfg);
    ASSERT_TRUE(v.ok()) << "pp " << pp << " vpp " << vpp << " m " << m << ": " << v.message();
    for (int r = 0; r < pp; ++r) EXPECT_EQ(p.actions[r].size(), size_t(2 * m * vpp));
  }
}

TEST(Schedule, InterleavedRejectsWhatMegatronRejects) {
  Config cfg = small_config(4, 2);
  Plan few = plan_equal_chunks(cfg, 3);
  try {
    schedule_interleaved(few);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("at least pp = 4"), std::string::npos) << e.what();
  }
  Config flat = small_config(4, 1);
  Plan p = plan_equal_chunks(flat, 8);
  EXPECT_THROW(schedule_interleaved(p), ConfigError);
  Plan sliced = testing::plan_from_chunks(
      cfg, {4096, 100, 100, 100},
      {{{0, 0, 2048}}, {{0, 2048, 2048}}, {{1, 0, 100}}, {{2, 0, 100}}, {{3, 0, 100}}});
  EXPECT_THROW(schedule_interleaved(sliced), ConfigError);
  Plan v2 = plan_equal_chunks(cfg, 8);
  EXPECT_THROW(schedule_1f1b(v2), ConfigError);  // flat schedules need vpp = 1
}

TEST(Schedule, EverySchedulePassesValidationOnRandomWorkloads) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    int pp = 1 << (trial % 4);
    Config cfg = small_config(pp);
    auto cost = cost::CostModel::from_config(cfg);
    Plan base = plan_random(cfg, rng, 6 + trial % 25);
    for (Schedule s : {Schedule::gpipe, Schedule::one_f_one_b, Schedule::seq1f1b, Schedule::epp}) {
      Plan p = base;
      if (s == Schedule::epp) {  // cut the batch into consecutive pipelines between sequences
        int32_t g = 0;
        std::vector<int32_t> open(p.seq_lengths.size(), 0);
        int live = 0;
        for (size_t c = 0; c < p.chunks.size(); ++c) {
          p.pipeline_of_chunk[c] = g;
          for (const Slice& sl : p.chunks[c].slices)
            if (!sl.is_whole()) {
              if (sl.offset == 0) ++live;
              if (sl.is_tail()) --live;
            }
          if (live == 0 && c % 4 == 3) ++g;
        }
      }
      schedule_build(p, s);
      EXPECT_EQ(p.schedule, schedule_name(s));
      plan_predict(p, cost, cfg);
      ValidationResult v = validate(p, cost, cfg);
      ASSERT_TRUE(v.ok()) << schedule_name(s) << " trial " << trial << ":\n" << v.message();
      EXPECT_GT(p.predicted_step_time, 0);
    }
  }
}

TEST(Schedule, EppDrainsEachPipelineBeforeTheNext) {
  Config cfg = small_config(4);
  Plan p = plan_equal_chunks(cfg, 12);
  for (int c = 0; c < 12; ++c) p.pipeline_of_chunk[c] = c / 5;  // 5 + 5 + 2 chunks
  schedule_epp(p);
  for (const auto& list : p.actions) {
    int32_t last = 0;
    for (const Action& a : list) {
      EXPECT_GE(p.pipeline_of_chunk[a.chunk], last);
      last = p.pipeline_of_chunk[a.chunk];
    }
  }
  set_uniform_times(p, 1.0, 2.0);
  Replay r = schedule_replay(p, {});
  ASSERT_FALSE(r.deadlock);
  // Three drained pipelines: (5+3)*3 + (5+3)*3 + (2+3)*3 with pp-1 = 3 fill/drain steps each.
  EXPECT_NEAR(r.step_time, (8 + 8 + 5) * 3.0, 1e-9);
}

TEST(Schedule, EppRejectsSequenceCutAcrossPipelines) {
  Config cfg = small_config(2);
  Plan p =
      testing::plan_from_chunks(cfg, {4096, 100}, {{{0, 0, 2048}}, {{0, 2048, 2048}, {1, 0, 100}}});
  p.pipeline_of_chunk = {0, 1};
  EXPECT_THROW(schedule_epp(p), Error);
}

// The last stage (1F1B limit: one chunk in flight) runs a sequence's slice forwards, then their
// backwards in reverse at once.
TEST(Schedule, LastStageRunsAllSlicesOfASequenceBeforeTheirBackwards) {
  Config cfg = small_config(4);
  // Chunks: seq 0 in three slices, then two short sequences.
  Plan p = testing::plan_from_chunks(
      cfg, {3000, 100, 100},
      {{{0, 0, 1000}}, {{0, 1000, 1000}}, {{0, 2000, 1000}}, {{1, 0, 100}}, {{2, 0, 100}}});
  schedule_epp(p);
  const auto& last = p.actions[3];
  ASSERT_GE(last.size(), 6u);
  std::vector<std::pair<ActionKind, int32_t>> got;
  for (int i = 0; i < 6; ++i) got.emplace_back(last[i].kind, last[i].chunk);
  std::vector<std::pair<ActionKind, int32_t>> want = {
      {ActionKind::forward, 0},  {ActionKind::forward, 1},  {ActionKind::forward, 2},
      {ActionKind::backward, 2}, {ActionKind::backward, 1}, {ActionKind::backward, 0}};
  EXPECT_EQ(got, want);
}

// The warm-up rule: before its i-th backward, rank r has run min(m, max(pp-r+i, ahead(i)+pp-1-r))
// forwards, ahead(i) = max over j >= i of need(j) - (j-i), need(j) = 1 + the latest forward
// position among backwards 0..j; checked on random long-tail batches, which must also replay
// without deadlock and never hold more chunks than need() alone asks for.
TEST(Schedule, EppWarmUpRuleOnRandomWorkloads) {
  std::mt19937 rng(21);
  for (int trial = 0; trial < 30; ++trial) {
    const int pp = 2 + trial % 7;
    Config cfg = small_config(pp, 1, 2 * pp);
    Plan p = plan_random(cfg, rng, 4 + trial);
    schedule_epp(p);
    const int64_t m = static_cast<int64_t>(p.chunks.size());
    // Backward order as the last stage shows it (every rank runs the backwards in one order).
    std::vector<int32_t> bwd;
    for (const Action& a : p.actions[pp - 1])
      if (a.kind == ActionKind::backward) bwd.push_back(a.chunk);
    ASSERT_EQ(static_cast<int64_t>(bwd.size()), m);
    std::vector<int64_t> need(m), ahead(m);
    int64_t run = 0;
    for (int64_t i = 0; i < m; ++i) need[i] = run = std::max<int64_t>(run, bwd[i] + 1);
    int64_t most_needed = 0;
    for (int64_t i = 0; i < m; ++i) {
      ahead[i] = need[i];
      for (int64_t j = i; j < m; ++j) ahead[i] = std::max(ahead[i], need[j] - (j - i));
      most_needed = std::max(most_needed, need[i] - i);
    }
    for (int r = 0; r < pp; ++r) {
      int64_t fwd = 0, i = 0, most_in_flight = 0;
      for (const Action& a : p.actions[r]) {
        if (a.kind == ActionKind::forward) {
          EXPECT_EQ(a.chunk, fwd) << "forwards run in chunk order";
          ++fwd;
          continue;
        }
        ASSERT_EQ(a.chunk, bwd[i]) << "trial " << trial << " rank " << r;
        const int64_t want =
            std::min<int64_t>(m, std::max<int64_t>(pp - r + i, ahead[i] + pp - 1 - r));
        EXPECT_EQ(fwd, want) << "trial " << trial << " rank " << r << " backward " << i;
        most_in_flight = std::max(most_in_flight, fwd - i);
        ++i;
      }
      EXPECT_EQ(most_in_flight,
                std::min<int64_t>(m, std::max<int64_t>(pp - r, most_needed + pp - 1 - r)));
    }
    set_uniform_times(p, 1.0, 2.0);
    Replay rep = schedule_replay(p, {});
    ASSERT_FALSE(rep.deadlock) << rep.deadlock_reason;
    auto cost = cost::CostModel::from_config(cfg);
    plan_predict(p, cost, cfg);
    ValidationResult v = validate(p, cost, cfg);
    ASSERT_TRUE(v.ok()) << "trial " << trial << ": " << v.message();
  }
}

// Sequences cut into k slices (each a 1-slice-per-chunk run), back to back, then whole sequences,
// equal times: forwards start early enough that the step is as long as plain 1F1B over the same
// number of chunks, (m + pp - 1)(f + b); bursts of forwards before each cut sequence used to
// drain the pipeline every time.
TEST(Schedule, EppCutSequencesKeepOneFOneBStepTime) {
  for (int pp : {2, 4, 8})
    for (int k : {2, 3, 5})
      for (int cut : {1, 3}) {
        Config cfg = small_config(pp, 1, 2 * pp);
        std::vector<int64_t> lens;
        std::vector<std::vector<testing::SliceSpec>> chunks;
        for (int q = 0; q < cut; ++q) {
          lens.push_back(1000 * k);
          for (int j = 0; j < k; ++j) chunks.push_back({{q, 1000 * j, 1000}});
        }
        for (int q = 0; q < 6; ++q) {
          lens.push_back(1000);
          chunks.push_back({{cut + q, 0, 1000}});
        }
        Plan p = testing::plan_from_chunks(cfg, lens, chunks);
        schedule_epp(p);
        set_uniform_times(p, 1.0, 2.0);
        Replay r = schedule_replay(p, {});
        ASSERT_FALSE(r.deadlock) << r.deadlock_reason;
        const int m = cut * k + 6;
        EXPECT_NEAR(r.step_time, (m + pp - 1) * 3.0, 1e-9)
            << "pp " << pp << " k " << k << " cut " << cut;
      }
}

// Seq1F1B cuts a packed micro-batch into chunks that may hold the end of one sequence and the
// start of the next; all chunks linked by a cut sequence run their backwards in reverse.
TEST(Schedule, Seq1f1bChunksSpanningSeveralSequences) {
  Config cfg = small_config(4);
  auto cost = cost::CostModel::from_config(cfg);
  // Micro-batch A(300) B(500) C(200) cut into four 250-token chunks, then a lone sequence D.
  Plan p = testing::plan_from_chunks(cfg, {300, 500, 200, 100},
                                     {{{0, 0, 250}},
                                      {{0, 250, 50}, {1, 0, 200}},
                                      {{1, 200, 250}},
                                      {{1, 450, 50}, {2, 0, 200}},
                                      {{3, 0, 100}}});
  schedule_seq1f1b(p);
  plan_predict(p, cost, cfg);
  ValidationResult v = validate(p, cost, cfg);
  ASSERT_TRUE(v.ok()) << v.message();
  for (int r = 0; r < 4; ++r) {
    std::vector<int32_t> bwd;
    for (const Action& a : p.actions[r])
      if (a.kind == ActionKind::backward) bwd.push_back(a.chunk);
    EXPECT_EQ(bwd, (std::vector<int32_t>{3, 2, 1, 0, 4})) << "rank " << r;
  }
}

TEST(Schedule, PredictionsComeFromTheCostModel) {
  Config cfg = small_config(2);
  auto cost = cost::CostModel::from_config(cfg);
  Plan p =
      testing::plan_from_chunks(cfg, {3000, 100}, {{{0, 0, 2000}}, {{0, 2000, 1000}, {1, 0, 100}}});
  schedule_epp(p);
  for (auto& list : p.actions)
    for (Action& a : list) a.recompute_layers = a.chunk == 0 ? 3 : 0;
  plan_predict(p, cost, cfg);
  for (const auto& list : p.actions)
    for (const Action& a : list) {
      auto sh = p.chunks[a.chunk].shapes();
      auto st = stage_shape(p.stages[a.stage]);
      double want = a.kind == ActionKind::forward
                        ? cost.forward_time(sh, st)
                        : cost.backward_time(sh, st) + cost.recompute_time(sh, a.recompute_layers);
      EXPECT_DOUBLE_EQ(a.predicted_time, want);
    }
  EXPECT_EQ(p.predicted_peak_bytes, schedule_memory_trace(p, cost, cfg).peak);
  EXPECT_DOUBLE_EQ(p.predicted_step_time,
                   schedule_replay(p, replay_transfer_times(p, cost, cfg)).step_time);
}

// A large random plan (512 sequences, pp 8) schedules and validates; its latency is measured in
// bench/planner_latency.sh, not asserted here.
TEST(Schedule, PlanOf512SequencesOnPp8Validates) {
  Config cfg = small_config(8, 1, 32);
  auto cost = cost::CostModel::from_config(cfg);
  std::mt19937 rng(3);
  Plan p = plan_random(cfg, rng, 512);
  schedule_epp(p);
  plan_predict(p, cost, cfg);
  ValidationResult v = validate(p, cost, cfg);
  EXPECT_TRUE(v.ok()) << v.message();
  for (const auto& list : p.actions) EXPECT_EQ(list.size(), 2 * p.chunks.size());
}

}  // namespace
}  // namespace infinipipe::plan
