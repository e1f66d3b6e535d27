// EPP's pipeline grouping (Eq. 14) charged by the recompute solve (pipeline_grouping.h): where
// Eq. 14's linear recompute estimate overcharges a long pipeline, the solve-charged grouping
// keeps it and the plan is faster; where memory does not bind nothing is solved and the
// answer is Eq. 14's; the work is bounded; the planner's plans stay valid.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/paper_llama.h"
#include "plan/baselines.h"
#include "plan/model_states.h"
#include "plan/pipeline_grouping.h"
#include "plan/planner.h"
#include "plan/schedule_memory.h"
#include "plan/sequence_processor.h"
#include "plan/stage_layout.h"
#include "plan/test_plan_util.h"
#include "plan/validate.h"

namespace infinipipe::plan {
namespace {

// Llama-30B at 96K on A800s, Ulysses 8 (examples/llama30b-96k.yaml): memory binds at pp 4.
Config big_config() {
  return infinipipe::testing::paper_llama(4, true);
}

// One K's chunk list of a batch, with what the EPP search hands the grouping.
struct GroupingCase {
  Config cfg = big_config();
  cost::CostModel cm = cost::CostModel::from_config(cfg);
  std::vector<int64_t> lengths;
  std::vector<StageSpec> stages = stage_layout_planned(cfg, cm, 4, 1);
  std::vector<Chunk> chunks;
  cost::StageShape first = stage_shape(stages[0]);
  int64_t act_budget = 0;

  GroupingCase(std::vector<int64_t> lens, int32_t k) : lengths(std::move(lens)) {
    const auto ref = processor_reference_stage(cfg.model, 4);
    chunks = sequence_process(lengths, k, cm, ref, cfg.parallel.min_tail_slice).chunks;
    const int64_t budget = planner_budget(cfg, cm);
    act_budget = budget - stage_static_bytes(cm, first, plan_memory_context(cfg, budget));
  }
  std::vector<int32_t> linear() const {
    return epp_group_pipelines(chunks, 4, cm, first, act_budget);
  }
  std::vector<int32_t> solved(GroupingSolveStats* st = nullptr) const {
    PipelineRecomputeGreedy solver(cfg, cm, stages, 1, lengths, chunks);
    return epp_group_pipelines_solved(chunks, 4, cm, first, act_budget, solver.pipeline_recompute(),
                                      st);
  }
  Candidate evaluate(const std::vector<int32_t>& groups) const {
    CandidateSpec spec;
    spec.stages = &stages;
    spec.chunks = chunks;
    spec.pipeline_of_chunk = groups;
    return planner_evaluate(cfg, cm, lengths, std::move(spec));
  }
};

// A batch whose K = 10 chunk list Eq. 14's linear estimate cuts into two pipelines: it charges
// every chunk of the long pipeline the recompute fraction of its worst in-flight window. The
// solve recomputes only around the long sequences, so the grouping keeps one pipeline, one
// bubble fewer, and the plan is faster.
TEST(PipelineGrouping, SolveKeepsThePipelineTheLinearEstimateCutAndIsFaster) {
  std::mt19937 rng(0);
  const GroupingCase c(testing::long_tail_lengths(rng, 160, 98304), 10);
  GroupingSolveStats st;
  const auto linear = c.linear(), solved = c.solved(&st);
  ASSERT_EQ(linear.size(), c.chunks.size());
  ASSERT_EQ(solved.size(), c.chunks.size());
  EXPECT_GT(linear.back(), 0) << "the case needs the estimate to cut";
  EXPECT_NE(solved, linear);
  EXPECT_GE(st.solves, 1);
  EXPECT_FALSE(st.fell_back);
  const Candidate a = c.evaluate(linear), b = c.evaluate(solved);
  ASSERT_TRUE(a.fits);
  ASSERT_TRUE(b.fits);
  EXPECT_LT(b.plan.predicted_step_time, a.plan.predicted_step_time);
  EXPECT_TRUE(validate(b.plan, c.cm, c.cfg).ok()) << validate(b.plan, c.cm, c.cfg).message();
  // Cuts only between sequences, pipelines in order.
  for (size_t i = 1; i < solved.size(); ++i) {
    EXPECT_GE(solved[i], solved[i - 1]);
    if (solved[i] != solved[i - 1]) {
      for (const Slice& s : c.chunks[i].slices) EXPECT_EQ(s.offset, 0);
    }
  }
}

// With room for everything no pipeline is over the budget: nothing is solved and the answer is
// Eq. 14's.
TEST(PipelineGrouping, NothingIsSolvedWhereMemoryDoesNotBind) {
  std::mt19937 rng(1);
  GroupingCase c(testing::long_tail_lengths(rng, 160, 98304), 8);
  c.act_budget = int64_t{1} << 50;
  int32_t calls = 0;
  GroupingSolveStats st;
  const auto solved = epp_group_pipelines_solved(
      c.chunks, 4, c.cm, c.first, c.act_budget,
      [&](int32_t, int32_t) {
        ++calls;
        return 0.0;
      },
      &st);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(st.solves, 0);
  EXPECT_EQ(solved, c.linear());
}

// A solve that finds no pipeline fitting: each candidate pipeline is solved once (cached), the work
// stops within the cap, and the answer falls back to Eq. 14's linear grouping.
TEST(PipelineGrouping, BoundedWorkFallsBackToTheLinearGrouping) {
  std::mt19937 rng(2);
  const GroupingCase c(testing::long_tail_lengths(rng, 160, 98304), 10);
  std::vector<std::pair<int32_t, int32_t>> asked;
  GroupingSolveStats st;
  const auto solved = epp_group_pipelines_solved(
      c.chunks, 4, c.cm, c.first, c.act_budget,
      [&](int32_t begin, int32_t end) {
        asked.push_back({begin, end});
        return std::numeric_limits<double>::infinity();
      },
      &st);
  EXPECT_TRUE(st.fell_back);
  EXPECT_GE(st.solves, 1);
  EXPECT_LE(st.solves, kGroupingMaxSolves);
  EXPECT_EQ(static_cast<int32_t>(asked.size()), st.solves);
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(std::adjacent_find(asked.begin(), asked.end()), asked.end())
      << "a candidate pipeline solved twice";
  EXPECT_EQ(solved, c.linear());
}

// The planner's EPP plans under the solve-charged grouping: valid, within the budget, and
// faster than or as fast as each K's linear grouping would have made the chosen K.
TEST(PipelineGrouping, PlannerPlansAreValid) {
  std::mt19937 rng(3);
  const Config cfg = big_config();
  const auto cm = cost::CostModel::from_config(cfg);
  for (int trial = 0; trial < 2; ++trial) {
    const auto lengths = testing::long_tail_lengths(rng, 200, 98304);
    const PlanResult r = make_plan_detailed(cfg, cm, lengths, Schedule::epp);
    EXPECT_TRUE(validate(r.plan, cm, cfg).ok()) << validate(r.plan, cm, cfg).message();
    for (int64_t peak : r.plan.predicted_peak_bytes) EXPECT_LE(peak, r.plan.memory_budget);
  }
}

}  // namespace
}  // namespace infinipipe::plan
