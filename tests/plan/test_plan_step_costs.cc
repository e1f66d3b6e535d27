// Each rank's measured costs outside its actions (cost::Coefficients::action_gap_s, step_tail_s):
// the replay starts every action its rank's gap after it could start and ends the step at the
// latest rank's last action plus its tail; plans carry them (rank_step_terms) and load back.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error_text.h"
#include "plan/plan_costs.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/schedule_replay.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using ::infinipipe::testing::error_text;
using testing::small_config;

// The shared coefficients on every rank, each rank with its own gap and tail.
cost::CostModel with_step_costs(const cost::CostModel& cm, std::vector<double> gap,
                                std::vector<double> tail) {
  std::vector<cost::Coefficients> ranks(gap.size(), cm.coefficients());
  for (size_t r = 0; r < gap.size(); ++r) {
    ranks[r].action_gap_s = gap[r];
    ranks[r].step_tail_s = tail[r];
  }
  return cm.with_rank_coefficients(ranks);
}

const std::vector<int64_t> kStepLengths = {6000, 3000, 1500, 900, 400, 300, 200, 100};

TEST(StepCosts, OneRankPaysEveryGapAndItsTail) {
  Config cfg = small_config(1, 1, 8);
  const auto cm = cost::CostModel::from_config(cfg);
  const Plan p = make_plan(cfg, with_step_costs(cm, {2e-3}, {0.05}), kStepLengths);
  double busy = 0;
  for (const Action& a : p.actions[0]) busy += a.predicted_time;
  const double n = static_cast<double>(p.actions[0].size());
  EXPECT_NEAR(p.predicted_step_time, busy + n * 2e-3 + 0.05, 1e-12 * p.predicted_step_time);
}

TEST(StepCosts, EveryActionStartsItsRanksGapAfterItCouldAndTheSlowestTailEndsTheStep) {
  Config cfg = small_config(2, 1, 8);
  const auto cm = cost::CostModel::from_config(cfg);
  const std::vector<double> gap = {1e-3, 4e-3}, tail = {0.02, 0.3};
  const Plan p = make_plan(cfg, with_step_costs(cm, gap, tail), kStepLengths);
  const std::vector<RankStepCost> costs = replay_step_costs(p, plan_cost_model(p, cm));
  ASSERT_EQ(costs.size(), 2u);
  EXPECT_EQ(costs[1].action_gap, 4e-3);
  EXPECT_EQ(costs[1].tail, 0.3);
  const auto transfer = replay_transfer_times(p, cm, cfg);
  const Replay r = schedule_replay(p, transfer, {}, costs);
  ASSERT_FALSE(r.deadlock);
  const int32_t ns = p.num_stages();
  double end = 0;
  for (int32_t k = 0; k < 2; ++k) {
    double prev = 0;
    for (size_t i = 0; i < p.actions[k].size(); ++i) {
      const Action& a = p.actions[k][i];
      // When its input is there: the neighbour's forward (backward) of the chunk, then the link.
      double ready = 0;
      for (int32_t k2 = 0; k2 < 2; ++k2)
        for (size_t j = 0; j < p.actions[k2].size(); ++j) {
          const Action& b = p.actions[k2][j];
          if (b.chunk != a.chunk || b.kind != a.kind) continue;
          if (a.kind == ActionKind::forward && b.stage == a.stage - 1)
            ready = r.timing[k2][j].end + transfer[a.chunk * ns + b.stage];
          if (a.kind == ActionKind::backward && b.stage == a.stage + 1)
            ready = r.timing[k2][j].end + transfer[a.chunk * ns + a.stage];
        }
      EXPECT_NEAR(r.timing[k][i].start, std::max(prev, ready) + gap[k], 1e-12);
      prev = r.timing[k][i].end;
    }
    end = std::max(end, prev + tail[k]);
  }
  EXPECT_DOUBLE_EQ(r.step_time, end);
  EXPECT_DOUBLE_EQ(p.predicted_step_time, r.step_time);
  // Without them the step is shorter, by at least the smallest tail.
  const Replay bare = schedule_replay(p, transfer);
  EXPECT_LT(bare.step_time + 0.02, r.step_time);
}

TEST(StepCosts, PlansCarryThemAndOlderPlansLoad) {
  const Config cfg = small_config(2, 1, 8);
  const auto cm = cost::CostModel::from_config(cfg);
  const Plan p = make_plan(cfg, with_step_costs(cm, {1e-3, 2e-3}, {0.01, 0.02}), kStepLengths);
  ASSERT_EQ(p.rank_step_terms.size(), 2u);
  EXPECT_EQ(p.rank_step_terms[1], (std::vector<double>{2e-3, 0.02}));
  const Plan back = plan_from_json(plan_to_json(p));
  EXPECT_EQ(back.rank_step_terms, p.rank_step_terms);
  const cost::CostModel rebuilt = plan_cost_model(back, cm);
  EXPECT_EQ(rebuilt.time_coefficients(1).action_gap_s, 2e-3);
  EXPECT_EQ(rebuilt.time_coefficients(0).step_tail_s, 0.01);
  // Rank costs without step costs carry none; a plan without the field loads without them.
  const Plan none = make_plan(cfg, with_step_costs(cm, {0, 0}, {0, 0}), kStepLengths);
  EXPECT_TRUE(none.rank_step_terms.empty());
  nlohmann::json j = plan_to_json(none);
  EXPECT_FALSE(j.contains("rank_step_terms"));
  EXPECT_TRUE(plan_from_json(j).rank_step_terms.empty());
}

TEST(StepCosts, BadStepTermsAreClearErrors) {
  const Config cfg = small_config(2, 1, 8);
  const auto cm = cost::CostModel::from_config(cfg);
  nlohmann::json j = plan_to_json(make_plan(cfg, cm, std::vector<int64_t>{1024, 512}));
  j["rank_step_terms"] = {std::vector<double>{1e-3, 0.01}};  // one rank of two
  EXPECT_NE(error_text([&] { plan_from_json(j); }).find("rank_step_terms"), std::string::npos);
  j["rank_step_terms"] = {std::vector<double>{1e-3, 0.01}, std::vector<double>{1e-3}};
  EXPECT_NE(error_text([&] { plan_from_json(j); }).find("2 entries"), std::string::npos);
  j["rank_step_terms"] = {std::vector<double>{1e-3, 0.01}, std::vector<double>{-1, 0.01}};
  EXPECT_NE(error_text([&] { plan_from_json(j); }).find(">= 0"), std::string::npos);
}

}  // namespace
}  // namespace infinipipe::plan
