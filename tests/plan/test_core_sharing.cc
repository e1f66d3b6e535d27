// Ranks that share cores (cost/core_sharing.h): an action progresses at the node's cores shared
// among the ranks computing at that moment, so overlapping actions of two ranks on one core take
// twice their own time and the others their own; other pipelines' ranks on the node compute
// independently, as often as this pipeline's; with no more ranks than cores the plan and its
// predictions are exactly those without hosts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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
  // Two ranks on one core, both of this pipeline.
  const std::vector<cost::RankHost> one_core = {{0, 1, 2}, {0, 1, 2}};
  EXPECT_EQ(cost::core_share_speeds(one_core, {true, true}), (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(cost::core_share_speeds(one_core, {true, false}), (std::vector<double>{1.0, 0.0}));
  EXPECT_EQ(cost::core_share_speeds(one_core, {true, true}, std::vector<double>{1, 1}),
            (std::vector<double>{0.5, 0.5}));  // no other pipeline: busy fractions do not count
  // The demo's layout: pp 2 x dp 2 on two cores; the other replica's two ranks always compute.
  const std::vector<cost::RankHost> demo = {{0, 2, 4}, {0, 2, 4}};
  const std::vector<double> always = {1, 1};
  EXPECT_EQ(cost::core_share_speeds(demo, {true, true}, always), (std::vector<double>{0.5, 0.5}));
  const std::vector<double> one = cost::core_share_speeds(demo, {false, true}, always);
  EXPECT_EQ(one[0], 0.0);
  EXPECT_DOUBLE_EQ(one[1], 2.0 / 3.0);
  // ... never compute: this pipeline has the cores to itself.
  EXPECT_EQ(cost::core_share_speeds(demo, {true, true}), (std::vector<double>{1.0, 1.0}));
  // Three ranks of this pipeline and three of others on four cores, the others always computing;
  // then the others mirror ranks 0, 1, 2: with rank 2 never computing, two of them compute.
  const std::vector<cost::RankHost> six = {{0, 4, 6}, {0, 4, 6}, {0, 4, 6}};
  const std::vector<double> all3 = {1, 1, 1}, two3 = {1, 1, 0};
  EXPECT_DOUBLE_EQ(cost::core_share_speeds(six, {true, true, true}, all3)[0], 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(cost::core_share_speeds(six, {true, true, false}, all3)[1], 4.0 / 5.0);
  EXPECT_DOUBLE_EQ(cost::core_share_speeds(six, {true, true, false}, two3)[1], 1.0);
  // Each node on its own: node 0's other rank (another pipeline's) halves this one's core; a
  // rank on a node with cores to spare is never slowed.
  const std::vector<cost::RankHost> nodes = {{0, 1, 2}, {5, 8, 2}};
  EXPECT_EQ(cost::core_share_speeds(nodes, {true, true}, std::vector<double>{1, 1}),
            (std::vector<double>{0.5, 1.0}));
  EXPECT_FALSE(cost::cores_shared(std::vector<cost::RankHost>{{0, 2, 2}, {0, 2, 2}}));
  EXPECT_TRUE(cost::cores_shared(demo));
}

// The count of independent events: the binomial when their probabilities are equal, the
// convolution of the two-point distributions otherwise.
TEST(CoreSharing, CountDistributionIsTheBinomialsClosedForm) {
  const double p = 0.3;
  const std::vector<double> b = cost::count_distribution(std::vector<double>(4, p));
  ASSERT_EQ(b.size(), 5u);
  const double choose[] = {1, 4, 6, 4, 1};
  for (int x = 0; x <= 4; ++x)
    EXPECT_NEAR(b[x], choose[x] * std::pow(p, x) * std::pow(1 - p, 4 - x), 1e-15);
  const std::vector<double> two = cost::count_distribution(std::vector<double>{0.9, 0.5});
  EXPECT_NEAR(two[0], 0.1 * 0.5, 1e-15);
  EXPECT_NEAR(two[1], 0.9 * 0.5 + 0.1 * 0.5, 1e-15);
  EXPECT_NEAR(two[2], 0.9 * 0.5, 1e-15);
  EXPECT_EQ(cost::count_distribution({}), (std::vector<double>{1.0}));
}

// The demo's layout with the other replica's stage-0 rank computing 90 % of the time and its
// stage-1 rank 50 %: the expected share of two cores, E[min(1, 2 / (n + X))], in closed form.
TEST(CoreSharing, OtherReplicasComputeIndependentlyWithTheirBusyFraction) {
  const std::vector<cost::RankHost> demo = {{0, 2, 4}, {0, 2, 4}};
  const double p = 0.9, q = 0.5;
  const double x0 = (1 - p) * (1 - q), x1 = p * (1 - q) + (1 - p) * q, x2 = p * q;
  const std::vector<double> busy = {p, q};
  const std::vector<double> alone = cost::core_share_speeds(demo, {true, false}, busy);
  EXPECT_NEAR(alone[0], x0 + x1 + x2 * 2.0 / 3.0, 1e-15);
  const std::vector<double> both = cost::core_share_speeds(demo, {true, true}, busy);
  EXPECT_NEAR(both[0], x0 + x1 * 2.0 / 3.0 + x2 * 0.5, 1e-15);
  EXPECT_EQ(both[0], both[1]);
  // Between the others never and always computing.
  EXPECT_GT(both[0], 0.5);
  EXPECT_LT(both[0], 1.0);
}

// The shared replay settles on its own busy fractions: replaying with them gives them back.
TEST(CoreSharing, SharedReplayIsAFixedPointOfItsBusyFractions) {
  const Config cfg = small_config(2, 1, 8);
  const auto cm = cost::CostModel::from_config(cfg);
  const Plan p = make_plan(cfg, cm, kLengths);
  const std::vector<cost::RankHost> demo = {{0, 2, 4}, {0, 2, 4}};
  const Replay r = schedule_replay(p, replay_transfer_times(p, cm, cfg), {}, {}, demo);
  ASSERT_FALSE(r.deadlock);
  ASSERT_EQ(r.busy.size(), 2u);
  EXPECT_LT(r.sharing_passes, kSharingMaxPasses);
  double span = 0;
  for (const auto& list : r.timing)
    for (const ActionTiming& t : list) span = std::max(span, t.end);
  for (size_t k = 0; k < 2; ++k) {
    double inside = 0;
    for (const ActionTiming& t : r.timing[k]) inside += t.end - t.start;
    EXPECT_NEAR(r.busy[k], inside / span, 1e-5);
    EXPECT_GT(r.busy[k], 0.0);
    // Each action between its own time and twice it (4 ranks, 2 cores, all computing).
    for (size_t i = 0; i < p.actions[k].size(); ++i) {
      const double wall = r.timing[k][i].end - r.timing[k][i].start;
      EXPECT_GE(wall, p.actions[k][i].predicted_time * (1 - 1e-12));
      EXPECT_LE(wall, 2 * p.actions[k][i].predicted_time * (1 + 1e-12));
    }
  }
  // Slower than the pipeline alone on the two cores, faster than every action at half speed
  // (the most that four ranks on two cores can slow one).
  const Replay alone = schedule_replay(p, replay_transfer_times(p, cm, cfg));
  std::vector<std::vector<double>> twice(2);
  for (size_t k = 0; k < 2; ++k)
    for (const Action& a : p.actions[k]) twice[k].push_back(2 * a.predicted_time);
  const Replay always = schedule_replay(p, replay_transfer_times(p, cm, cfg), twice);
  EXPECT_GT(r.step_time, alone.step_time);
  EXPECT_LT(r.step_time, always.step_time);
  // The same plan replays to the same bytes.
  const Replay again = schedule_replay(p, replay_transfer_times(p, cm, cfg), {}, {}, demo);
  EXPECT_EQ(again.step_time, r.step_time);
  EXPECT_EQ(again.busy, r.busy);
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
