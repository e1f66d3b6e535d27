// Ring collectives over a group of consecutive devices (all-reduce, all-gather, reduce-scatter):
// one rule for the bandwidth a group gets, used by the pipeline plans (ZeRO-3 inside a stage,
// the data-parallel all-reduce) and the baselines alike, so the same devices moving the same
// bytes cost the same seconds whoever plans them (docs/cost-model.md, "Communication").
#pragma once

#include <cstdint>

#include "cost/cost_model.h"

namespace infinipipe::cost {

// Devices [first, first + size) of a cluster with `per_node` devices per node (< 1: one per node).
struct DeviceGroup {
  int64_t first = 0;
  int64_t size = 1;
  int64_t per_node = 1;
};

// Whether the group's devices lie on more than one node.
bool group_spans_nodes(const DeviceGroup& g);

// The fewest of the group's devices on any one node it uses.
int64_t group_fewest_on_a_node(const DeviceGroup& g);

// Bytes/s of one ring step per device. Inside a node: the intra-node link. Across nodes, NCCL
// opens one ring per NIC and every device drives its own NIC, so the boundary a ring crosses is
// as wide as the node's NICs the group holds: the inter-node bandwidth (per device) times the
// group's fewest devices on a node, at most the intra-node link the rings also cross.
double group_ring_bandwidth(const CostModel& cm, const DeviceGroup& g);

// Ring all-gather or reduce-scatter of `bytes` (the whole buffer) over the group:
// (n−1)/n · bytes / B + (n−1) · latency.
double group_gather_time(const CostModel& cm, const DeviceGroup& g, double bytes);

// Ring all-reduce (reduce-scatter then all-gather): 2(n−1)/n · bytes / B + 2(n−1) · latency.
double group_allreduce_time(const CostModel& cm, const DeviceGroup& g, double bytes);

}  // namespace infinipipe::cost
