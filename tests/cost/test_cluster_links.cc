// The cluster's links are configuration: values given in ClusterConfig replace the preset's in
// every communication term, and bad values are refused.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "cost/cost_model.h"

namespace infinipipe::cost {
namespace {

Config a800_cluster() {
  Config cfg;
  cfg.cluster.device = "a800-80gb";
  cfg.cluster.num_devices = 16;
  cfg.cluster.devices_per_node = 8;
  cfg.training.bf16 = true;
  return cfg;
}

TEST(ClusterLinks, PresetStatesItsInterNodeReading) {
  const DeviceSpec d = device_preset("a800-80gb", true);
  // 400 Gb/s per node shared by 8 GPUs, at 80% of the link.
  EXPECT_DOUBLE_EQ(d.inter_node_bandwidth, 400e9 / 8 / 8 * 0.8);
  EXPECT_NE(d.link_sources.find("PER NODE"), std::string::npos);
}

TEST(ClusterLinks, ConfiguredValuesReachEveryTerm) {
  Config cfg = a800_cluster();
  cfg.cluster.intra_node_bandwidth = 100e9;
  cfg.cluster.inter_node_bandwidth = 20e9;
  cfg.cluster.intra_node_latency = 2e-6;
  cfg.cluster.inter_node_latency = 30e-6;
  const CostModel cm = CostModel::from_config(cfg);
  EXPECT_DOUBLE_EQ(cm.p2p_time(1'000'000, false), 1e6 / 100e9 + 2e-6);
  EXPECT_DOUBLE_EQ(cm.p2p_time(1'000'000, true), 1e6 / 20e9 + 30e-6);
  // Ring all-reduce over 4 ranks between nodes: 2·3/4·V/B + 6 latencies.
  EXPECT_DOUBLE_EQ(cm.allreduce_time(4'000'000, 4, true), 1.5 * 4e6 / 20e9 + 6 * 30e-6);
  EXPECT_NE(cm.device().link_sources.find("set by the configuration"), std::string::npos);
  // A group with one device per node sends everything over the inter-node link and pays at
  // least its latency per all-to-all.
  const CostModel across = cm.with_ulysses_degree(16, 1);
  EXPECT_DOUBLE_EQ(across.coefficients().alltoall_latency_s,
                   std::max(30e-6, cm.coefficients().alltoall_latency_s));
  EXPECT_DOUBLE_EQ(across.coefficients().alltoall_bandwidth, 20e9);
}

// Ulysses 16 over two nodes of 8: a device sends 7/15 of its all-to-all bytes over NVLink and
// 8/15 over its NIC at once; the NIC's share is slower and sets the time.
TEST(ClusterLinks, AllToAllAcrossNodesSendsOnlyTheOtherNodesShareOverTheNic) {
  const CostModel cm = CostModel::from_config(a800_cluster());
  const Coefficients& c = cm.coefficients();
  const CostModel two = cm.with_ulysses_degree(16, 8);
  const double want = 15.0 / std::max(7.0 / c.alltoall_bandwidth, 8.0 / c.p2p_bandwidth_inter);
  EXPECT_DOUBLE_EQ(two.coefficients().alltoall_bandwidth, want);
  EXPECT_DOUBLE_EQ(two.coefficients().alltoall_bandwidth, 15.0 / 8.0 * c.p2p_bandwidth_inter);
  // Inside one node nothing changes but the degree.
  EXPECT_DOUBLE_EQ(cm.with_ulysses_degree(8, 8).coefficients().alltoall_bandwidth,
                   c.alltoall_bandwidth);
  EXPECT_DOUBLE_EQ(cm.with_ulysses_degree(8, 0).coefficients().alltoall_bandwidth,
                   c.alltoall_bandwidth);
}

// FlexSP's release plans with all-to-all bandwidths measured on 8-GPU A100 nodes joined by
// InfiniBand (Hetu-Galvatron, flexsp branch, galvatron/flexsp_solver/solver.py:
// {16: 10.33, 32: 5.94, 64: 4.87} GB/s, per-device buffer over time). The a800 preset's
// inter-node link (the paper's 400 Gb/s per node, 8 GPUs, 80 %) with the split above lands
// within 20 % of each, where charging every byte to the NIC was 2x too slow at 16.
TEST(ClusterLinks, AllToAllAcrossNodesIsNearFlexSpsMeasuredBandwidths) {
  Config cfg = a800_cluster();
  const std::pair<int64_t, double> measured[] = {{16, 10.33e9}, {32, 5.94e9}, {64, 4.87e9}};
  for (const auto& [u, gbs] : measured) {
    cfg.cluster.num_devices = u;
    const CostModel g = CostModel::from_config(cfg).with_ulysses_degree(u, 8);
    // Per-device buffer over time, the large-message limit (the per-call latency left out).
    const double buffer_per_second =
        g.coefficients().alltoall_bandwidth * static_cast<double>(u) / static_cast<double>(u - 1);
    EXPECT_NEAR(buffer_per_second / gbs, 1.0, 0.2) << "degree " << u;
  }
}

TEST(ClusterLinks, NegativeValuesAreRefused) {
  Config cfg = a800_cluster();
  cfg.cluster.inter_node_latency = -1;
  EXPECT_THROW(cfg.cluster.validate(), ConfigError);
  cfg.cluster.inter_node_latency = 0;
  cfg.cluster.intra_node_bandwidth = -5;
  EXPECT_THROW(cfg.cluster.validate(), ConfigError);
}

}  // namespace
}  // namespace infinipipe::cost
