// The layout search with the ranks' hosts: each replica's pipeline takes its ranks' hosts in the
// runtime's rank order, a layout whose ranks share cores is scored by the plans made with them,
// and hosts that share nothing change nothing.
#include "sim/layout_hosts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/tiny_model.h"
#include "core/error.h"
#include "plan/planner.h"
#include "sim/layout_search.h"
#include "sim/simulator.h"

namespace infinipipe::sim {
namespace {

// A small Llama on the cpu preset at pp 2 x dp 2: what `train --pp auto --dp 2` searches.
Config small_cpu_model() {
  Config cfg;
  cfg.model = testing::tiny_train_model(4);
  cfg.model.vocab_size = 256;
  cfg.cluster.device = "cpu";
  cfg.cluster.num_devices = 4;
  cfg.training.global_batch_size = 8;
  return cfg;
}

LayoutSpace pp2_dp2(std::vector<cost::RankHost> hosts) {
  LayoutSpace s;
  s.num_devices = 4;
  s.devices_per_node = 4;
  s.pp = 2;
  s.dp = 2;
  s.ulysses = 1;
  s.schedules = {Schedule::epp};
  s.rank_hosts = std::move(hosts);
  return s;
}

const std::vector<std::vector<int64_t>> kBatches = {{256, 256, 200, 180, 256, 90, 256, 140},
                                                    {256, 256, 256, 256, 256, 256, 256, 213}};

TEST(LayoutHosts, EachReplicaTakesItsRanksInTheRuntimesOrder) {
  // Devices 0..3 on nodes named 0, 0, 2, 2 (a node is named by its lowest rank).
  const std::vector<cost::RankHost> devices = {{0, 2, 2}, {0, 2, 2}, {2, 1, 2}, {2, 1, 2}};
  const Layout l{2, 1, 1, 2, Schedule::epp};
  // rank = stage x dp + replica: replica 1 holds ranks 1 (stage 0) and 3 (stage 1).
  const std::vector<cost::RankHost> r1 = layout_replica_hosts(devices, l, 1);
  ASSERT_EQ(r1.size(), 2u);
  EXPECT_EQ(r1[0].node, 0);
  EXPECT_EQ(r1[1].node, 2);
  EXPECT_EQ(r1[1].cores, 1);
  // With pipelines on adjacent ranks (rank = replica x pp + stage) replica 1 holds ranks 2, 3.
  Layout pipelines = l;
  pipelines.order = RankOrder::pipelines;
  const std::vector<cost::RankHost> p1 = layout_replica_hosts(devices, pipelines, 1);
  ASSERT_EQ(p1.size(), 2u);
  EXPECT_EQ(p1[0].node, 2);
  EXPECT_EQ(p1[1].node, 2);
  EXPECT_TRUE(layout_replica_hosts({}, l, 0).empty());
  EXPECT_THROW(layout_replica_hosts(std::span(devices).first(3), l, 0), ConfigError);
  EXPECT_THROW(layout_replica_hosts(devices, Layout{1, 1, 2, 2, Schedule::epp}, 0), ConfigError);
}

TEST(LayoutHosts, RanksSharingCoresScoreThePlansMadeWithTheirHosts) {
  const Config base = small_cpu_model();
  const cost::CostModel cm = cost::CostModel::from_config(base);
  // Four ranks on one node of two cores, as `mpirun -np 4` on a 2-core machine.
  const std::vector<cost::RankHost> shared(4, cost::RankHost{0, 2, 4});
  const LayoutSearchResult r = layout_search(base, cm, pp2_dp2(shared), kBatches);
  ASSERT_NE(r.best(), nullptr) << r.ranked.front().reason;

  // The same score planned here: each replica's share with its pipeline's hosts.
  const LayoutSpace space = pp2_dp2(shared);
  const Config cfg = layout_config(base, space, r.best()->layout);
  double time = 0;
  int64_t tokens = 0;
  for (const auto& batch : kBatches) {
    double step = 0;
    const auto shares = plan::balance_replicas(batch, 2, cm, cfg);
    for (size_t k = 0; k < shares.size(); ++k) {
      const cost::CostModel gk = cm.with_rank_hosts(
          layout_replica_hosts(shared, r.best()->layout, static_cast<int64_t>(k)));
      const plan::PlanResult p = plan::make_plan_detailed(cfg, gk, shares[k], Schedule::epp);
      ASSERT_EQ(p.plan.rank_hosts.size(), 2u);
      step = std::max(step, simulate(p.plan, gk, cfg).step_time);
    }
    time += step;
    for (int64_t len : batch) tokens += len;
  }
  EXPECT_DOUBLE_EQ(r.best()->tokens_per_s, static_cast<double>(tokens) / time);

  // Sharing two cores among four ranks is slower than a core each.
  const LayoutSearchResult own = layout_search(base, cm, pp2_dp2({}), kBatches);
  ASSERT_NE(own.best(), nullptr);
  EXPECT_LT(r.best()->tokens_per_s, own.best()->tokens_per_s);
}

TEST(LayoutHosts, HostsThatShareNoCoresRankExactlyAsNone) {
  const Config base = small_cpu_model();
  const cost::CostModel cm = cost::CostModel::from_config(base);
  const std::vector<cost::RankHost> roomy(4, cost::RankHost{0, 4, 4});
  const LayoutSearchResult with = layout_search(base, cm, pp2_dp2(roomy), kBatches);
  const LayoutSearchResult none = layout_search(base, cm, pp2_dp2({}), kBatches);
  ASSERT_NE(with.best(), nullptr);
  ASSERT_NE(none.best(), nullptr);
  EXPECT_EQ(with.best()->tokens_per_s, none.best()->tokens_per_s);
  EXPECT_EQ(with.best()->peak_bytes, none.best()->peak_bytes);
  EXPECT_EQ(with.best()->setting, none.best()->setting);
}

}  // namespace
}  // namespace infinipipe::sim
