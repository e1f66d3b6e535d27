#include "cost/collective_table.h"

#include <algorithm>
#include <utility>

namespace infinipipe::cost {
namespace {

int64_t node_size(const DeviceGroup& g) {
  return std::max<int64_t>(1, g.per_node);
}

// The fewest and the most of the group's devices on any one node it uses.
std::pair<int64_t, int64_t> devices_on_a_node(const DeviceGroup& g) {
  const int64_t per = node_size(g);
  const int64_t last = g.first + g.size - 1;
  int64_t fewest = g.size, most = 1;
  for (int64_t node = g.first / per; node <= last / per; ++node) {
    const int64_t lo = std::max(g.first, node * per), hi = std::min(last, node * per + per - 1);
    fewest = std::min(fewest, hi - lo + 1);
    most = std::max(most, hi - lo + 1);
  }
  return {std::max<int64_t>(1, fewest), most};
}

bool is_ring(Collective op) {
  return op == Collective::all_gather || op == Collective::reduce_scatter ||
         op == Collective::all_reduce;
}

// Ring steps of one call over n devices (NCCL's nsteps): a gather or scatter passes n−1 chunks,
// an all-reduce is one of each.
double ring_steps(Collective op, double n) {
  if (!is_ring(op)) return 0.0;
  return op == Collective::all_reduce ? 2 * (n - 1) : n - 1;
}

size_t index(Collective op) {
  return static_cast<size_t>(op);
}

}  // namespace

bool group_spans_nodes(const DeviceGroup& g) {
  if (g.size <= 1) return false;
  const int64_t per = node_size(g);
  return g.first / per != (g.first + g.size - 1) / per;
}

int64_t group_fewest_on_a_node(const DeviceGroup& g) {
  return devices_on_a_node(g).first;
}

const char* collective_name(Collective op) {
  switch (op) {
    case Collective::all_gather:
      return "all_gather";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::all_to_all:
      return "all_to_all";
    case Collective::send_recv:
      return "send_recv";
  }
  return "";
}

const CollectiveCost& CollectiveTable::row(Collective op, bool inter_node) const {
  return (inter_node ? inter : intra)[index(op)];
}

CollectiveCost& CollectiveTable::row(Collective op, bool inter_node) {
  return (inter_node ? inter : intra)[index(op)];
}

// Across nodes NCCL opens one ring per NIC and every device drives its own, so the boundary a
// ring crosses is as wide as the node's NICs the group holds, at most the NVLink it also crosses.
double CollectiveTable::ring_bandwidth(Collective op, const DeviceGroup& g) const {
  const double inside = row(op, false).bus_bandwidth;
  if (!group_spans_nodes(g)) return inside;
  return std::min(inside,
                  row(op, true).bus_bandwidth * static_cast<double>(group_fewest_on_a_node(g)));
}

double CollectiveTable::time(Collective op, const DeviceGroup& g, double bytes) const {
  if (bytes <= 0) return 0.0;
  const bool across = group_spans_nodes(g);
  if (op == Collective::send_recv) {
    const CollectiveCost& r = row(op, across);
    return bytes / r.bus_bandwidth + r.call_latency_s;
  }
  if (g.size <= 1) return 0.0;
  const double n = static_cast<double>(g.size);
  if (op == Collective::all_to_all) {
    const CollectiveCost &in = row(op, false), &out = row(op, true);
    if (!across) return in.call_latency_s + (n - 1) / n * bytes / in.bus_bandwidth;
    // A device sends 1/n of its buffer to each peer: to those on its node over NVLink, to the
    // rest over its NIC share, both at once, so the slower sets the time.
    const double near = static_cast<double>(devices_on_a_node(g).second - 1);
    const double far = n - static_cast<double>(group_fewest_on_a_node(g));
    return std::max(in.call_latency_s, out.call_latency_s) +
           bytes / n * std::max(near / in.bus_bandwidth, far / out.bus_bandwidth);
  }
  const CollectiveCost& r = row(op, across);
  const double factor = op == Collective::all_reduce ? 2 * (n - 1) / n : (n - 1) / n;
  return r.call_latency_s + ring_steps(op, n) * r.step_latency_s +
         factor * bytes / ring_bandwidth(op, g);
}

bool CollectiveTable::complete() const {
  for (const auto* rows : {&intra, &inter})
    for (const CollectiveCost& r : *rows)
      if (!(r.bus_bandwidth > 0)) return false;
  return true;
}

CollectiveTable link_table(const LinkFigures& l, const std::string& source) {
  CollectiveTable t;
  for (const bool across : {false, true}) {
    const double bw = across ? l.inter_bandwidth : l.intra_bandwidth;
    const double lat = across ? l.inter_latency_s : l.intra_latency_s;
    for (int k = 0; k < kCollectives; ++k) {
      const auto op = static_cast<Collective>(k);
      CollectiveCost& r = t.row(op, across);
      r = {is_ring(op) ? 0.0 : lat, is_ring(op) ? lat : 0.0, bw, source};
    }
  }
  t.row(Collective::all_to_all, false).call_latency_s = l.alltoall_latency_s;
  t.row(Collective::all_to_all, false).bus_bandwidth = l.alltoall_bandwidth;
  return t;
}

void override_span(CollectiveTable& t, bool inter_node, double bandwidth, double latency_s) {
  for (int k = 0; k < kCollectives; ++k) {
    const auto op = static_cast<Collective>(k);
    CollectiveCost& r = t.row(op, inter_node);
    if (bandwidth > 0) r.bus_bandwidth = bandwidth;
    if (latency_s > 0) {
      r.call_latency_s = is_ring(op) ? 0.0 : latency_s;
      r.step_latency_s = is_ring(op) ? latency_s : 0.0;
    }
    if (bandwidth > 0 || latency_s > 0) r.source += "; set by the configuration";
  }
}

}  // namespace infinipipe::cost
