// Ranks that share cores (cost/core_sharing.h): an action progresses at the node's cores shared
// among the ranks computing at that moment, so overlapping actions of two ranks on one core take
// twice their own time and the others their own; with no more ranks than cores the plan and its
// predictions are exactly those without hosts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error_text.h"
#include "cost/core_sharing.h"
#include "plan/plan_costs.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/schedule_replay.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using ::infinipipe::testing::error_text;
using testing::small_config;

const std::vector<int64_t> kLengths = {6000, 3000, 1500, 900, 400, 300, 200, 100};

TEST(CoreSharing, SpeedsShareTheNodesCoresAmongTheRanksComputing) {
  // Two ranks on one core.
  const std::vector<cost::RankHost> one_core = {{0, 1, 2}, {0, 1, 2}};
  EXPECT_EQ(cost::core_share_speeds(one_core, {true, true}), (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(cost::core_share_speeds(one_core, {true, false}), (std::vector<double>{1.0, 0.0}));
  // The demo's layout: pp 2 x dp 2 on two cores; the other replica's two ranks mirror these.
  const std::vector<cost::RankHost> demo = {{0, 2, 4}, {0, 2, 4}};
  EXPECT_EQ(cost::core_share_speeds(demo, {true, true}), (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(cost::core_share_speeds(demo, {false, true}), (std::vector<double>{0.0, 1.0}));
  // Three ranks of this pipeline and three of others on four cores.
  const std::vector<cost::RankHost> six = {{0, 4, 6}, {0, 4, 6}, {0, 4, 6}};
  const std::vector<double> s = cost::core_share_speeds(six, {true, true, true});
  EXPECT_DOUBLE_EQ(s[0], 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(cost::core_share_speeds(six, {true, true, false})[1], 1.0);
  // Each node on its own: node 0's other rank (another pipeline's) halves this one's core; a
  // rank on a node with cores to spare is never slowed.
  const std::vector<cost::RankHost> nodes = {{0, 1, 2}, {5, 8, 2}};
  EXPECT_EQ(cost::core_share_speeds(nodes, {true, true}), (std::vector<double>{0.5, 1.0}));
  EXPECT_FALSE(cost::cores_shared(std::vector<cost::RankHost>{{0, 2, 2}, {0, 2, 2}}));
  EXPECT_TRUE(cost::cores_shared(demo));
}

// Two ranks, two chunks, forwards only, every action 1 s: rank 0's second forward and rank 1's
// first run at once and share the core.
TEST(CoreSharing, OverlappingActionsTakeTwiceTheirTimeOthersTheirOwn) {
  Plan p;
  p.pp = 2;
  p.chunks.resize(2);
  p.stages = {{0, 0, 0, 4, true, false}, {1, 1, 4, 4, false, true}};
  p.actions = {{{ActionKind::forward, 0, 0, 0, 1.0}, {ActionKind::forward, 1, 0, 0, 1.0}},
               {{ActionKind::forward, 0, 1, 0, 1.0}, {ActionKind::forward, 1, 1, 0, 1.0}}};
  const Replay own = schedule_replay(p, {});
  EXPECT_DOUBLE_EQ(own.step_time, 3.0);
  const std::vector<cost::RankHost> one_core = {{0, 1, 2}, {0, 1, 2}};
  const Replay r = schedule_replay(p, {}, {}, {}, one_core);
  ASSERT_FALSE(r.deadlock);
  EXPECT_DOUBLE_EQ(r.timing[0][0].end, 1.0);  // alone
  EXPECT_DOUBLE_EQ(r.timing[0][1].start, 1.0);
  EXPECT_DOUBLE_EQ(r.timing[0][1].end, 3.0);  // shared with rank 1's first
  EXPECT_DOUBLE_EQ(r.timing[1][0].start, 1.0);
  EXPECT_DOUBLE_EQ(r.timing[1][0].end, 3.0);
  EXPECT_DOUBLE_EQ(r.timing[1][1].start, 3.0);
  EXPECT_DOUBLE_EQ(r.timing[1][1].end, 4.0);  // alone again
  EXPECT_DOUBLE_EQ(r.step_time, 4.0);
  // A gap and a tail take wall time and compute nothing: rank 1's gap of 0.5 s starts its first
  // forward at 1.5, so rank 0's second runs alone for 0.5 s, then shared.
  const std::vector<RankStepCost> gaps = {{0.0, 0.0}, {0.5, 0.25}};
  const Replay g = schedule_replay(p, {}, {}, gaps, one_core);
  EXPECT_DOUBLE_EQ(g.timing[0][1].end, 2.5);          // 0.5 alone, then 1 s of wall for 0.5
  EXPECT_DOUBLE_EQ(g.timing[1][0].end, 1.5 + 1.5);    // 0.5 of work shared, 0.5 alone
  EXPECT_DOUBLE_EQ(g.timing[1][1].start, 3.0 + 0.5);  // its gap
  EXPECT_DOUBLE_EQ(g.step_time, 4.5 + 0.25);
}

// In every shared replay an action's wall time is its own time plus half the time it overlapped
// the other rank's actions (two ranks, one core), and no rank starts earlier than it could.
TEST(CoreSharing, EveryActionsWallIsItsOwnPlusHalfItsOverlap) {
  const Config cfg = small_config(2, 1, 8);
  const auto cm = cost::CostModel::from_config(cfg);
  const Plan p = make_plan(cfg, cm, kLengths);
  const std::vector<cost::RankHost> one_core = {{0, 1, 2}, {0, 1, 2}};
  const Replay r = schedule_replay(p, replay_transfer_times(p, cm, cfg), {}, {}, one_core);
  ASSERT_FALSE(r.deadlock);
  const Replay alone = schedule_replay(p, replay_transfer_times(p, cm, cfg));
  EXPECT_GT(r.step_time, alone.step_time);
  int shared = 0;
  for (int32_t k = 0; k < 2; ++k)
    for (size_t i = 0; i < p.actions[k].size(); ++i) {
      const ActionTiming& t = r.timing[k][i];
      double overlap = 0;
      for (const ActionTiming& u : r.timing[1 - k])
        overlap += std::max(0.0, std::min(t.end, u.end) - std::max(t.start, u.start));
      shared += overlap > 0 ? 1 : 0;
      EXPECT_NEAR(t.end - t.start, p.actions[k][i].predicted_time + 0.5 * overlap,
                  1e-9 * r.step_time);
    }
  EXPECT_GT(shared, 0);
}

TEST(CoreSharing, NoMoreRanksThanCoresPlansExactlyAsWithoutHosts) {
  const Config cfg = small_config(2, 1, 8);
  const auto cm = cost::CostModel::from_config(cfg);
  const Plan bare = make_plan(cfg, cm, kLengths);
  for (const std::vector<cost::RankHost>& hosts :
       {std::vector<cost::RankHost>{{0, 2, 2}, {0, 2, 2}},
        std::vector<cost::RankHost>{{0, 1, 1}, {1, 1, 1}}}) {
    const Plan p = make_plan(cfg, cm.with_rank_hosts(hosts), kLengths);
    ASSERT_EQ(p.rank_hosts.size(), 2u);
    EXPECT_EQ(p.predicted_step_time, bare.predicted_step_time);
    nlohmann::json a = plan_to_json(p), b = plan_to_json(bare);
    a.erase("rank_hosts");
    EXPECT_EQ(a.dump(), b.dump());  // every decision and prediction, bit for bit
  }
}

TEST(CoreSharing, PlansCarryTheirHostsAndPredictWallTimes) {
  const Config cfg = small_config(2, 1, 8);
  const auto cm = cost::CostModel::from_config(cfg);
  const std::vector<cost::RankHost> demo = {{0, 2, 4}, {0, 2, 4}};
  const Plan p = make_plan(cfg, cm.with_rank_hosts(demo), kLengths);
  const Plan back = plan_from_json(plan_to_json(p));
  ASSERT_EQ(back.rank_hosts.size(), 2u);
  EXPECT_EQ(back.rank_hosts[1].cores, 2);
  EXPECT_EQ(back.rank_hosts[1].ranks, 4);
  EXPECT_EQ(plan_to_json(back).dump(), plan_to_json(p).dump());
  // Each action's prediction is its wall time in the shared replay: never below its own.
  const auto own = plan_action_seconds(p, plan_cost_model(p, cm), cfg);
  const Replay r = schedule_replay(p, replay_transfer_times(p, cm, cfg), own, {}, p.rank_hosts);
  EXPECT_EQ(r.step_time, p.predicted_step_time);
  for (size_t k = 0; k < 2; ++k)
    for (size_t i = 0; i < own[k].size(); ++i) {
      EXPECT_EQ(p.actions[k][i].predicted_time, r.timing[k][i].end - r.timing[k][i].start);
      EXPECT_GE(p.actions[k][i].predicted_time, own[k][i] * (1 - 1e-12));
    }
  nlohmann::json j = plan_to_json(p);
  j["rank_hosts"] = {{0, 2, 4}};  // one rank of two
  EXPECT_NE(error_text([&] { plan_from_json(j); }).find("rank_hosts"), std::string::npos);
  j["rank_hosts"] = {{0, 2, 4}, {0, 0, 4}};  // no cores
  EXPECT_NE(error_text([&] { plan_from_json(j); }).find("cores"), std::string::npos);
}

}  // namespace
}  // namespace infinipipe::plan
