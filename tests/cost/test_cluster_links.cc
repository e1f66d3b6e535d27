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
  // 400 Gb/s per node shared by 8 GPUs: a node's ring all-reduce moves below 50 GB/s, and the
  // device's inter-node link is its share, the send/recv row.
  EXPECT_LT(8 * d.collectives.row(Collective::all_reduce, true).bus_bandwidth, 50e9);
  EXPECT_EQ(d.inter_node_bandwidth, d.collectives.row(Collective::send_recv, true).bus_bandwidth);
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
  EXPECT_DOUBLE_EQ(cm.collective_time(Collective::all_reduce, {0, 4, 1}, 4'000'000),
                   1.5 * 4e6 / 20e9 + 6 * 30e-6);
  EXPECT_NE(cm.device().link_sources.find("set by the configuration"), std::string::npos);
  // The all-to-all inside a node moves at the link given for it and pays its latency once.
  EXPECT_DOUBLE_EQ(cm.collective_time(Collective::all_to_all, {0, 8, 8}, 8e6),
                   2e-6 + 7.0 / 8 * 8e6 / 100e9);
  // A group with one device per node sends everything over the inter-node link and pays its
  // latency per all-to-all.
  EXPECT_DOUBLE_EQ(cm.collective_time(Collective::all_to_all, {0, 16, 1}, 16e6),
                   30e-6 + 16e6 / 16 * 15 / 20e9);
}

// Ulysses 16 over two nodes of 8: a device sends 7/15 of its all-to-all bytes over NVLink and
// 8/15 over its NIC at once; the NIC's share is slower and sets the time.
TEST(ClusterLinks, AllToAllAcrossNodesSendsOnlyTheOtherNodesShareOverTheNic) {
  const CostModel cm = CostModel::from_config(a800_cluster());
  const CollectiveTable& t = cm.coefficients().collectives;
  const CollectiveCost &nvlink = t.row(Collective::all_to_all, false),
                       &nic = t.row(Collective::all_to_all, true);
  const double bytes = 64e6;
  const double call = std::max(nvlink.call_latency_s, nic.call_latency_s);
  const double two = cm.collective_time(Collective::all_to_all, {0, 16, 8}, bytes);
  EXPECT_DOUBLE_EQ(
      two, call + bytes / 16 * std::max(7.0 / nvlink.bus_bandwidth, 8.0 / nic.bus_bandwidth));
  EXPECT_DOUBLE_EQ(two, call + bytes / 16 * 8.0 / nic.bus_bandwidth);
  // The Ulysses group's all-to-alls are these calls.
  const CostModel u16 = cm.with_ulysses_degree(16, 8);
  const ModelConfig& m = cm.model();
  const double buffer = 65536.0 / 16 * (2 * m.q_size() + 2 * m.kv_size()) * 2;
  EXPECT_DOUBLE_EQ(u16.ulysses_alltoall_time(65536),
                   4 * cm.collective_time(Collective::all_to_all, {0, 16, 8}, buffer / 4));
  // Inside one node nothing changes but the degree.
  EXPECT_DOUBLE_EQ(cm.with_ulysses_degree(8, 8).ulysses_alltoall_time(65536),
                   cm.with_ulysses_degree(8, 0).ulysses_alltoall_time(65536));
  EXPECT_DOUBLE_EQ(cm.collective_time(Collective::all_to_all, {0, 8, 8}, bytes),
                   nvlink.call_latency_s + 7.0 / 8 * bytes / nvlink.bus_bandwidth);
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
    const CostModel g = CostModel::from_config(cfg);
    // Per-device buffer over time, the large-message limit (the per-call latency left out).
    const DeviceGroup group{0, u, 8};
    const double buffer = 1e9;
    const double buffer_per_second =
        buffer / (g.collective_time(Collective::all_to_all, group, 2 * buffer) -
                  g.collective_time(Collective::all_to_all, group, buffer));
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
