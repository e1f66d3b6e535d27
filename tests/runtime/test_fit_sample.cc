// What the online fit learns from a measured action: its interval where the plan's ranks have
// cores of their own; where they share them, the interval scaled to a core of its own by the
// share the plan's replay gave the action.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "plan/planner.h"
#include "runtime/fit_sample.h"

namespace infinipipe::runtime {
namespace {

TEST(FitSample, SharedActionsAreScaledByTheirShareOthersKeepTheirInterval) {
  EXPECT_DOUBLE_EQ(action_fit_seconds(2.0, nullptr), 2.0);
  const ActionShare half{0.5, 1.0};  // the replay gave it half a core throughout
  EXPECT_DOUBLE_EQ(action_fit_seconds(2.0, &half), 1.0);
  const ActionShare alone{0.5, 0.5};  // ran alone in the replay
  EXPECT_DOUBLE_EQ(action_fit_seconds(2.0, &alone), 2.0);
  const ActionShare unknown{0.0, 0.0};
  EXPECT_DOUBLE_EQ(action_fit_seconds(2.0, &unknown), 2.0);
}

Config two_stage_config() {
  Config c;
  c.model.num_layers = 4;
  c.model.hidden_size = 128;
  c.model.num_attention_heads = 4;
  c.model.seq_length = 4096;
  c.parallel.pipeline_parallel = 2;
  c.cluster.device = "cpu";
  c.cluster.num_devices = 2;
  c.cluster.devices_per_node = 2;
  return c;
}

TEST(FitSample, PlanSharesHoldEveryActionWhereCoresAreSharedAndNoneElsewhere) {
  Config cfg = two_stage_config();
  const auto cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> lengths = {3000, 1200, 600, 300, 100};
  const plan::Plan own = plan::make_plan(cfg, cm, lengths);
  EXPECT_TRUE(plan_shares(own, cm, cfg).empty());
  // Sharing a core, one chunk is as fast as several overlapping ones: the budget of the plan
  // with cores of their own keeps several chunks, so that actions overlap.
  ASSERT_GT(own.chunks.size(), 1u);
  for (int64_t peak : own.predicted_peak_bytes)
    cfg.training.memory_budget = std::max(cfg.training.memory_budget, peak);
  const auto shared_cm = cm.with_rank_hosts({{0, 1, 2}, {0, 1, 2}});
  const plan::Plan shared = plan::make_plan(cfg, shared_cm, lengths);
  const PlanShares shares = plan_shares(shared, shared_cm, cfg);
  size_t actions = 0, slowed = 0;
  for (const auto& list : shared.actions)
    for (const plan::Action& a : list) {
      ++actions;
      const ActionShare& s = shares.at({static_cast<int>(a.kind), a.stage, a.chunk});
      EXPECT_EQ(s.wall_s, a.predicted_time);
      EXPECT_LE(s.own_s, s.wall_s * (1 + 1e-12));
      slowed += s.wall_s > s.own_s * (1 + 1e-9) ? 1 : 0;
    }
  EXPECT_EQ(shares.size(), actions);
  EXPECT_GT(slowed, 0u);  // a pipeline of two ranks on one core overlaps somewhere
}

}  // namespace
}  // namespace infinipipe::runtime
