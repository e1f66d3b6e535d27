// Ring collectives over consecutive devices: inside a node the intra-node link; across nodes the
// NICs of the group's devices on its thinnest node, at most the intra-node link; closed forms
// with the rows one configured link gives (cost/collective_table.h).
#include <gtest/gtest.h>

#include "cost/cost_model.h"

namespace infinipipe::cost {
namespace {

CostModel links(double intra_bw, double inter_bw) {
  Config cfg;
  cfg.cluster.device = "a800-80gb";
  cfg.cluster.num_devices = 32;
  cfg.cluster.devices_per_node = 8;
  cfg.training.bf16 = true;
  cfg.cluster.intra_node_bandwidth = intra_bw;
  cfg.cluster.inter_node_bandwidth = inter_bw;
  cfg.cluster.intra_node_latency = 2e-6;
  cfg.cluster.inter_node_latency = 30e-6;
  return CostModel::from_config(cfg);
}

double ring_bandwidth(const CostModel& cm, const DeviceGroup& g) {
  return cm.coefficients().collectives.ring_bandwidth(Collective::all_gather, g);
}

double gather(const CostModel& cm, const DeviceGroup& g, double bytes) {
  return cm.collective_time(Collective::all_gather, g, bytes);
}

double allreduce(const CostModel& cm, const DeviceGroup& g, double bytes) {
  return cm.collective_time(Collective::all_reduce, g, bytes);
}

TEST(Collectives, GroupsInsideANodeUseTheIntraNodeLink) {
  const CostModel cm = links(100e9, 5e9);
  EXPECT_FALSE(group_spans_nodes({8, 8, 8}));
  EXPECT_DOUBLE_EQ(ring_bandwidth(cm, {8, 8, 8}), 100e9);
  EXPECT_DOUBLE_EQ(gather(cm, {8, 4, 8}, 4e6), 0.75 * 4e6 / 100e9 + 3 * 2e-6);
  EXPECT_DOUBLE_EQ(allreduce(cm, {0, 1, 8}, 4e6), 0.0);
}

TEST(Collectives, GroupsAcrossNodesDriveTheNicsOfTheirDevices) {
  const CostModel cm = links(100e9, 5e9);
  // 32 devices on 4 whole nodes: 8 NICs at every node boundary.
  EXPECT_TRUE(group_spans_nodes({0, 32, 8}));
  EXPECT_EQ(group_fewest_on_a_node({0, 32, 8}), 8);
  EXPECT_DOUBLE_EQ(ring_bandwidth(cm, {0, 32, 8}), 40e9);
  EXPECT_DOUBLE_EQ(allreduce(cm, {0, 32, 8}, 8e9), 2 * (31.0 / 32 * 8e9 / 40e9 + 31 * 30e-6));
  // 12 devices from 4: 4 on the first node, 8 on the next; the thinner side binds.
  EXPECT_EQ(group_fewest_on_a_node({4, 12, 8}), 4);
  EXPECT_DOUBLE_EQ(ring_bandwidth(cm, {4, 12, 8}), 20e9);
  // Never faster than the intra-node link the rings also cross.
  EXPECT_DOUBLE_EQ(ring_bandwidth(links(30e9, 5e9), {0, 32, 8}), 30e9);
  // One device per node (or none said): one NIC, as a point-to-point link.
  EXPECT_DOUBLE_EQ(ring_bandwidth(cm, {0, 4, 1}), 5e9);
  EXPECT_DOUBLE_EQ(ring_bandwidth(cm, {0, 4, 0}), 5e9);
}

}  // namespace
}  // namespace infinipipe::cost
