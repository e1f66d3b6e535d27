// The baseline tuners' explanations (tune_batch_level, tune_seq1f1b): every setting they
// evaluated is listed, in order, with the predictions an independent evaluation of that setting
// gives; the winner is marked and carries the plan's own numbers; and the verdicts match budgets
// constructed from those predictions (over by the right amount, slower by the right percentage).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "explain_test_util.h"
#include "plan/baselines.h"
#include "plan/plan_explain.h"
#include "plan/planner.h"
#include "plan/sequence_processor.h"
#include "plan/stage_layout.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using testing::example_config;
using testing::example_lengths;
using testing::max_of;

size_t chosen_index(const PlanExplain& ex) {
  size_t n = 0, at = 0;
  for (size_t i = 0; i < ex.candidates.size(); ++i)
    if (ex.candidates[i].chosen) ++n, at = i;
  EXPECT_EQ(n, 1u) << "exactly one chosen candidate";
  return at;
}

// What the tuner must have said of candidate `c` against the chosen `win` under `budget`.
void expect_verdict(const ExplainCandidate& c, const ExplainCandidate& win, int64_t budget) {
  SCOPED_TRACE(c.setting);
  if (c.chosen) {
    EXPECT_EQ(c.verdict, "chosen: the fastest that fits");
    return;
  }
  if (!c.fits) {
    const auto worst = std::max_element(c.peak_bytes.begin(), c.peak_bytes.end());
    EXPECT_EQ(c.verdict, fmt::format("rank {} over budget by {}", worst - c.peak_bytes.begin(),
                                     format_bytes(*worst - budget)));
  } else if (c.step_time == win.step_time) {
    EXPECT_EQ(c.verdict, "as fast as the chosen " + win.setting + ", which the search found first");
  } else {
    EXPECT_GT(c.step_time, win.step_time);
    EXPECT_EQ(c.verdict,
              fmt::format("{:.1f}% slower than the chosen {}",
                          100 * (c.step_time - win.step_time) / win.step_time, win.setting));
  }
}

class BatchLevelExplain : public ::testing::Test {
 protected:
  std::vector<int64_t> lengths = example_lengths();

  // The chunks of a recorded batch-level setting, rebuilt from its knobs.
  std::vector<Chunk> chunks_of(const ExplainCandidate& c) const {
    if (c.micro_batch_size == 0) return pack_micro_batches(lengths, c.micro_batch_tokens);
    std::vector<Chunk> out;
    for (size_t i = 0; i < lengths.size(); i += static_cast<size_t>(c.micro_batch_size)) {
      Chunk ch;
      for (size_t j = i; j < std::min(lengths.size(), i + static_cast<size_t>(c.micro_batch_size));
           ++j)
        ch.slices.push_back({static_cast<int32_t>(j), 0, lengths[j], lengths[j]});
      out.push_back(std::move(ch));
    }
    return out;
  }

  // Every candidate's numbers equal an independent evaluation of its setting.
  void expect_independent(const Config& cfg, const PlanExplain& ex, Schedule schedule) const {
    const auto cm = cost::CostModel::from_config(cfg);
    const auto stages = stage_layout_planned(cfg, cm, 2, 1);
    for (const ExplainCandidate& c : ex.candidates) {
      SCOPED_TRACE(c.setting);
      CandidateSpec spec;
      spec.schedule = schedule;
      spec.stages = &stages;
      spec.chunks = chunks_of(c);
      spec.static_recompute = c.recompute_layers;
      const Candidate again = planner_evaluate(cfg, cm, lengths, std::move(spec));
      EXPECT_EQ(c.step_time, again.plan.predicted_step_time);
      EXPECT_EQ(c.peak_bytes, again.plan.predicted_peak_bytes);
      EXPECT_EQ(c.fits, again.fits);
      EXPECT_EQ(c.chunks, static_cast<int32_t>(again.plan.chunks.size()));
    }
  }
};

// Without recompute the 1F1B tuner tries each micro-batch capacity (the longest sequence times
// 1, 2, 4, ... up to the batch) and one sequence per micro-batch, once each.
TEST_F(BatchLevelExplain, OneF1bListsEveryCapacityWithItsOwnPredictions) {
  const Config cfg = example_config(int64_t{4} << 30, RecomputeGranularity::none);
  const auto cm = cost::CostModel::from_config(cfg);
  const PlanResult r = make_plan_detailed(cfg, cm, lengths, Schedule::one_f_one_b);
  const PlanExplain& ex = r.explain;

  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  std::vector<std::pair<int64_t, int64_t>> expected;  // (tokens, sequences) per micro-batch
  for (int64_t cap = longest; expected.size() < 8; cap *= 2) {
    expected.push_back({cap, 0});
    if (cap >= total) break;
  }
  expected.push_back({0, 1});
  std::vector<std::pair<int64_t, int64_t>> recorded;
  for (const ExplainCandidate& c : ex.candidates) {
    recorded.push_back({c.micro_batch_tokens, c.micro_batch_size});
    EXPECT_EQ(c.recompute_layers, 0);
    EXPECT_EQ(c.vpp, 1);
  }
  EXPECT_EQ(recorded, expected);
  EXPECT_EQ(static_cast<int32_t>(ex.candidates.size()), r.knobs.candidates);
  expect_independent(cfg, ex, Schedule::one_f_one_b);

  const ExplainCandidate& win = ex.candidates[chosen_index(ex)];
  EXPECT_EQ(win.step_time, r.plan.predicted_step_time);
  EXPECT_EQ(win.peak_bytes, r.plan.predicted_peak_bytes);
  EXPECT_EQ(win.micro_batch_tokens, r.knobs.micro_batch_tokens);
  EXPECT_EQ(win.micro_batch_size, r.knobs.micro_batch_size);
  for (const ExplainCandidate& c : ex.candidates) {
    EXPECT_TRUE(c.fits) << "4 GiB holds every setting";
    EXPECT_GE(c.step_time, win.step_time);
    expect_verdict(c, win, cfg.training.memory_budget);
  }
}

// A budget just under the unconstrained winner's peak: the winner is over by exactly the
// difference, and the fastest setting that still fits wins.
TEST_F(BatchLevelExplain, ABudgetUnderTheWinnersPeakRejectsItByTheDifference) {
  const Config roomy = example_config(int64_t{4} << 30, RecomputeGranularity::none);
  const auto cm = cost::CostModel::from_config(roomy);
  const PlanExplain first = make_plan_detailed(roomy, cm, lengths, Schedule::one_f_one_b).explain;
  const ExplainCandidate& old_win = first.candidates[chosen_index(first)];
  const int64_t budget = max_of(old_win.peak_bytes) - (int64_t{3} << 20);  // 3 MiB short

  const ExplainCandidate* expected_win = nullptr;
  for (const ExplainCandidate& c : first.candidates)
    if (max_of(c.peak_bytes) <= budget && (!expected_win || c.step_time < expected_win->step_time))
      expected_win = &c;
  ASSERT_NE(expected_win, nullptr) << "some setting must fit the constructed budget";

  const Config tight = example_config(budget, RecomputeGranularity::none);
  const PlanResult r = make_plan_detailed(tight, cm, lengths, Schedule::one_f_one_b);
  const PlanExplain& ex = r.explain;
  ASSERT_EQ(ex.candidates.size(), first.candidates.size());
  const ExplainCandidate& win = ex.candidates[chosen_index(ex)];
  EXPECT_EQ(win.setting, expected_win->setting);
  EXPECT_EQ(win.step_time, r.plan.predicted_step_time);
  bool old_rejected = false;
  for (const ExplainCandidate& c : ex.candidates) {
    expect_verdict(c, win, budget);
    if (c.setting == old_win.setting) {
      old_rejected = true;
      EXPECT_FALSE(c.fits);
      EXPECT_NE(c.verdict.find("over budget by 3.00 MiB"), std::string::npos) << c.verdict;
    }
  }
  EXPECT_TRUE(old_rejected);
}

// With the tuner choosing static recompute, each micro-batch setting is bisected over the
// recompute count: every count tried is listed, the counts below the kept one are over budget,
// the counts above it fit but are slower.
TEST_F(BatchLevelExplain, RecomputeBisectionListsEveryCountTried) {
  const Config cfg = example_config(int64_t{900} << 20, RecomputeGranularity::adaptive);
  const auto cm = cost::CostModel::from_config(cfg);
  const PlanResult r = make_plan_detailed(cfg, cm, lengths, Schedule::gpipe);
  const PlanExplain& ex = r.explain;
  EXPECT_EQ(static_cast<int32_t>(ex.candidates.size()), r.knobs.candidates);
  expect_independent(cfg, ex, Schedule::gpipe);
  const ExplainCandidate& win = ex.candidates[chosen_index(ex)];
  EXPECT_EQ(win.recompute_layers, r.knobs.recompute_layers);
  EXPECT_GT(win.recompute_layers, 0) << "900 MiB needs recompute";
  EXPECT_EQ(win.step_time, r.plan.predicted_step_time);

  bool saw_more = false;
  for (const ExplainCandidate& c : ex.candidates) {
    expect_verdict(c, win, cfg.training.memory_budget);
    if (c.micro_batch_tokens != win.micro_batch_tokens ||
        c.micro_batch_size != win.micro_batch_size)
      continue;
    if (c.recompute_layers < win.recompute_layers) {
      EXPECT_FALSE(c.fits) << c.setting;
    }
    if (c.recompute_layers > win.recompute_layers) {
      saw_more = true;
      EXPECT_TRUE(c.fits) << c.setting;
      EXPECT_GT(c.step_time, win.step_time) << c.setting;
    }
  }
  EXPECT_TRUE(saw_more) << "the bisection tries the most recompute before narrowing\n"
                        << explain_text(ex);
  // Each setting's first try is no recompute.
  for (size_t i = 0; i < ex.candidates.size(); ++i) {
    const bool first_of_setting =
        i == 0 || ex.candidates[i].micro_batch_tokens != ex.candidates[i - 1].micro_batch_tokens ||
        ex.candidates[i].micro_batch_size != ex.candidates[i - 1].micro_batch_size;
    if (first_of_setting) {
      EXPECT_EQ(ex.candidates[i].recompute_layers, 0) << ex.candidates[i].setting;
    }
  }
}

// Seq1F1B: every (capacity, slices) pair, the winner's chunks rebuilt from its knobs.
TEST(Seq1f1bExplain, ListsEveryCapacityAndSliceCount) {
  const Config cfg = example_config(int64_t{4} << 30, RecomputeGranularity::none);
  const auto cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> lengths = example_lengths();
  PlanResult r = make_plan_detailed(cfg, cm, lengths, Schedule::seq1f1b);
  const PlanExplain& ex = r.explain;
  EXPECT_EQ(static_cast<int32_t>(ex.candidates.size()), r.knobs.candidates);
  std::vector<int32_t> ks;
  for (const ExplainCandidate& c : ex.candidates)
    if (c.micro_batch_tokens == ex.candidates[0].micro_batch_tokens) ks.push_back(c.k);
  EXPECT_EQ(ks, (std::vector<int32_t>{1, 2, 4, 8, 16})) << "8192 / 16 = 512, the least tail";
  EXPECT_EQ(ex.candidates.size() % ks.size(), 0u);

  const ExplainCandidate& win = ex.candidates[chosen_index(ex)];
  EXPECT_EQ(win.k, r.knobs.slices);
  EXPECT_EQ(win.micro_batch_tokens, r.knobs.micro_batch_tokens);
  const auto stages = stage_layout_planned(cfg, cm, 2, 1);
  CandidateSpec spec;
  spec.schedule = Schedule::seq1f1b;
  spec.stages = &stages;
  spec.chunks = seq1f1b_chunks(lengths, win.micro_batch_tokens, win.k, cm,
                               processor_reference_stage(cm.model(), 2));
  spec.static_recompute = 0;
  EXPECT_EQ(planner_evaluate(cfg, cm, lengths, std::move(spec)).plan.predicted_step_time,
            win.step_time);
  for (const ExplainCandidate& c : ex.candidates)
    expect_verdict(c, win, cfg.training.memory_budget);

  explain_chosen_plan(r.explain, r.plan, cfg, cm);
  EXPECT_NE(r.explain.pack_rule.find(fmt::format("at most {} tokens", win.micro_batch_tokens)),
            std::string::npos)
      << r.explain.pack_rule;
}

}  // namespace
}  // namespace infinipipe::plan
