// Measured links between hosts price each transfer by the link it crosses: a pipeline hop by its
// two hosts, an all-reduce by its ring's slowest edge, and a link between hosts is shared by the
// flows that cross it at once. The rank order decides which of those cross.
#include <gtest/gtest.h>

#include "core/error.h"
#include "cost/cost_model.h"
#include "cost/host_link_table.h"

namespace infinipipe::cost {
namespace {

constexpr double kInside = 5e9, kBetween = 1e8;  // bytes/s

// Two hosts of `slots` ranks each: a fast link inside each, a slow one between them.
HostLinkTable two_hosts(int64_t slots) {
  HostLinkTable t;
  t.hosts = {{"host-a", slots}, {"host-b", slots}};
  t.links = {{kInside, 1e-6}, {kBetween, 50e-6}, {kBetween, 50e-6}, {kInside, 1e-6}};
  return t;
}

Coefficients coefficients() {
  Coefficients c;
  c.collectives.row(Collective::send_recv, false) = {2e-6, 0, 2e9, "test"};
  return c;
}

TEST(HostLinkTable, FillsHostsInOrderAndRefusesMoreRanksThanSlots) {
  const HostLinkTable t = two_hosts(2);
  EXPECT_EQ(t.host_of_ranks(4), (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(t.host_of_ranks(3), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_THROW(t.host_of_ranks(5), ConfigError);
}

// mpirun --map-by node places ranks round-robin: a job's measured placement wins over slots.
TEST(HostLinkTable, AJobsMeasuredPlacementWins) {
  HostLinkTable t = two_hosts(2);
  t.host_of_rank = {0, 1, 0, 1};
  t.validate();
  EXPECT_EQ(t.host_of_ranks(4), t.host_of_rank);
  EXPECT_THROW(t.host_of_ranks(2), ConfigError);
  const RankGrid grid{2, 2, 1, RankOrder::megatron};  // replica 0: ranks 0 and 2, on host A
  EXPECT_DOUBLE_EQ(host_pipeline_links(t, coefficients(), grid, 0).at(0, 1).bandwidth, kInside);
  t.host_of_rank = {0, 1, 1, 1};
  EXPECT_THROW(t.validate(), Error);  // host-b would run 3 ranks in 2 slots
}

TEST(HostLinkTable, BadTablesAreRefused) {
  HostLinkTable t = two_hosts(2);
  t.validate();
  t.links[1].bandwidth = 0;
  EXPECT_THROW(t.validate(), Error);  // between hosts: must be measured
  t = two_hosts(2);
  t.links[1].latency_s = 1e-3;
  EXPECT_THROW(t.validate(), Error);  // asymmetric
  t = two_hosts(2);
  t.hosts[1].name = "host-a";
  EXPECT_THROW(t.validate(), Error);
  t = two_hosts(2);
  t.links.pop_back();
  EXPECT_THROW(t.validate(), Error);
  t = two_hosts(2);
  t.links[0].bandwidth = 0;  // inside a host: not measured is allowed
  t.validate();
}

// pp 2 x dp 2 on two hosts of two ranks. Megatron's order (rank = stage x dp + replica) puts
// stage 0 on host A: both replicas' hops cross and share the link, and the all-reduces stay
// inside. Pipelines on adjacent ranks put each pipeline on a host: hops inside, and the two
// stages' rings both cross.
TEST(HostLinkTable, TheOrderDecidesWhatCrossesAndWhatShares) {
  const HostLinkTable t = two_hosts(2);
  const Coefficients c = coefficients();
  RankGrid grid{2, 2, 1, RankOrder::megatron};
  for (int64_t r = 0; r < 2; ++r) {
    const PipelineLinks l = host_pipeline_links(t, c, grid, r);
    EXPECT_DOUBLE_EQ(l.at(0, 1).bandwidth, kBetween / 2);
    EXPECT_DOUBLE_EQ(l.at(1, 0).latency_s, 50e-6);
  }
  const double bytes = 1e8;
  // Inside host A: 2 (n-1)/n bytes / B + 2 (n-1) latency, n = 2.
  EXPECT_DOUBLE_EQ(host_allreduce_time(t, c, grid, 0, bytes), bytes / kInside + 2e-6);

  grid.order = RankOrder::pipelines;
  const PipelineLinks l = host_pipeline_links(t, c, grid, 1);
  EXPECT_DOUBLE_EQ(l.at(0, 1).bandwidth, kInside);
  // Both stages' rings cross A -> B once and B -> A once: each gets half the link.
  EXPECT_DOUBLE_EQ(host_allreduce_time(t, c, grid, 1, bytes), bytes / (kBetween / 2) + 100e-6);
}

TEST(HostLinkTable, AnUnmeasuredHostUsesTheIntraNodeCoefficients) {
  HostLinkTable t = two_hosts(2);
  t.links[0] = {0, 0};
  const Coefficients c = coefficients();
  const RankGrid grid{2, 2, 1, RankOrder::megatron};
  EXPECT_DOUBLE_EQ(host_allreduce_time(t, c, grid, 0, 1e8), 1e8 / 2e9 + 2 * 2e-6);
  EXPECT_DOUBLE_EQ(host_allreduce_time(t, c, grid, 1, 1e8), 1e8 / kInside + 2e-6);
}

// Ulysses groups are consecutive devices: with 4 devices a host and ulysses 2, Megatron's order
// keeps each stage's dp x ulysses ring on one host.
TEST(HostLinkTable, UlyssesGroupsAreConsecutiveDevices) {
  const HostLinkTable t = two_hosts(4);
  const Coefficients c = coefficients();
  const RankGrid grid{2, 2, 2, RankOrder::megatron};
  EXPECT_EQ(grid.devices(), 8);
  EXPECT_EQ(grid.device_of(1, 0, 1), 5);
  EXPECT_DOUBLE_EQ(host_allreduce_time(t, c, grid, 1, 4e8), 2 * (0.75 * 4e8 / kInside + 3e-6));
  EXPECT_DOUBLE_EQ(host_pipeline_links(t, c, grid, 0).at(0, 1).bandwidth, kBetween / 2);
}

TEST(HostLinkTable, TheConfigNamesTheGridAndAutoIsResolvedFirst) {
  Config cfg;
  cfg.parallel.pipeline_parallel = 2;
  cfg.parallel.data_parallel = 3;
  cfg.parallel.rank_placement = RankPlacement::pipelines;
  const RankGrid g = config_rank_grid(cfg);
  EXPECT_EQ(g.order, RankOrder::pipelines);
  EXPECT_EQ(g.device_of(1, 2, 0), 5);  // replica x pp + stage
  cfg.parallel.rank_placement = RankPlacement::auto_;
  EXPECT_THROW(config_rank_grid(cfg), ConfigError);
}

}  // namespace
}  // namespace infinipipe::cost
