// One table prices every collective (all-gather, reduce-scatter, all-reduce, all-to-all,
// send/recv) by NCCL's own tuning model (NVIDIA/nccl src/graph/tuning.cc: a call's base latency,
// a latency per ring step, the bytes over the bus bandwidth), so the pipeline plans and every
// baseline pay the same seconds for the same devices moving the same bytes
// (docs/cost-model.md, "Collective costs").
#pragma once

#include <array>
#include <cstdint>
#include <string>

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

enum class Collective { all_gather, reduce_scatter, all_reduce, all_to_all, send_recv };
inline constexpr int kCollectives = 5;
// "all_gather", ... as calibration files and the docs name them.
const char* collective_name(Collective op);

// One collective over one span.
struct CollectiveCost {
  double call_latency_s = 0;  // per call, whatever the group (NCCL's base latency, the launch)
  double step_latency_s = 0;  // per ring step: n−1 for a gather or scatter, 2(n−1) for all-reduce
  double bus_bandwidth = 0;  // bytes/s per device: NCCL-tests' busbw
  std::string source;        // where the row comes from
};

// Rows by collective, inside a node and across nodes. An inter row's bus bandwidth is ONE
// device's share of its node's NICs: a group holding g devices of each node it uses gets g times
// it (at most the intra row's), so a row measured over whole nodes of d devices is that busbw / d.
struct CollectiveTable {
  std::array<CollectiveCost, kCollectives> intra, inter;
  // A collective and compute overlapping on one device each run this many times slower (NCCL's
  // kernels take SMs and memory bandwidth from the compute's); 1: no slowdown (the CPU engine,
  // whose collectives never overlap compute). Charged where ZeRO-3 hides its gathers.
  double overlap_slowdown = 1.0;
  std::string overlap_source = "none: collectives that never overlap compute";

  const CollectiveCost& row(Collective op, bool inter_node) const;
  CollectiveCost& row(Collective op, bool inter_node);
  // Seconds of one call moving `bytes` (NCCL-tests' size: the all-reduce buffer, the all-gather
  // output, the reduce-scatter input, one device's all-to-all buffer, the message) over `g`.
  double time(Collective op, const DeviceGroup& g, double bytes) const;
  // The bytes/s per device a ring collective over `g` moves at.
  double ring_bandwidth(Collective op, const DeviceGroup& g) const;
  // Whether every row's bandwidth is > 0 (a table that can price).
  bool complete() const;
};

// The rows one pair of links implies, as the cost model priced before the table: rings at the
// link with its latency per step, send/recv at the link plus its latency once, the all-to-all at
// its own measured figures inside a node and at the inter-node link across.
struct LinkFigures {
  double intra_bandwidth = 0, inter_bandwidth = 0;  // bytes/s per device
  double intra_latency_s = 0, inter_latency_s = 0;
  double alltoall_bandwidth = 0, alltoall_latency_s = 0;
};
CollectiveTable link_table(const LinkFigures& l, const std::string& source);

// A link's bandwidth or latency given for one span (a cluster option): every row of that span
// moves at `bandwidth` (when > 0); with `latency_s` (when > 0) a ring row waits it each step and
// nothing a call, the others each call, so one link prices as a single link always did.
void override_span(CollectiveTable& t, bool inter_node, double bandwidth, double latency_s);

}  // namespace infinipipe::cost
