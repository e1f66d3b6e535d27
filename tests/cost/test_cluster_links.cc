// The cluster's links are configuration: values given in ClusterConfig replace the preset's in
// every communication term, and bad values are refused.
#include <gtest/gtest.h>

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
  // An all-to-all across nodes pays the inter-node latency for each of its 4 messages.
  const CostModel across = cm.with_ulysses_degree(16, true);
  EXPECT_DOUBLE_EQ(across.coefficients().p2p_latency_s, 30e-6);
  EXPECT_DOUBLE_EQ(across.coefficients().alltoall_bandwidth, 20e9);
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
