#include "cost/collectives.h"

#include <algorithm>

namespace infinipipe::cost {

namespace {

int64_t node_size(const DeviceGroup& g) {
  return std::max<int64_t>(1, g.per_node);
}

}  // namespace

bool group_spans_nodes(const DeviceGroup& g) {
  if (g.size <= 1) return false;
  const int64_t per = node_size(g);
  return g.first / per != (g.first + g.size - 1) / per;
}

int64_t group_fewest_on_a_node(const DeviceGroup& g) {
  const int64_t per = node_size(g);
  const int64_t last = g.first + g.size - 1;
  int64_t fewest = g.size;
  for (int64_t node = g.first / per; node <= last / per; ++node) {
    const int64_t lo = std::max(g.first, node * per), hi = std::min(last, node * per + per - 1);
    fewest = std::min(fewest, hi - lo + 1);
  }
  return std::max<int64_t>(1, fewest);
}

double group_ring_bandwidth(const CostModel& cm, const DeviceGroup& g) {
  const Coefficients& c = cm.coefficients();
  if (!group_spans_nodes(g)) return c.p2p_bandwidth_intra;
  return std::min(c.p2p_bandwidth_intra,
                  c.p2p_bandwidth_inter * static_cast<double>(group_fewest_on_a_node(g)));
}

double group_gather_time(const CostModel& cm, const DeviceGroup& g, double bytes) {
  if (g.size <= 1 || bytes <= 0) return 0.0;
  const double k = static_cast<double>(g.size);
  return (k - 1) / k * bytes / group_ring_bandwidth(cm, g) +
         (k - 1) * cm.link_latency(group_spans_nodes(g));
}

double group_allreduce_time(const CostModel& cm, const DeviceGroup& g, double bytes) {
  return 2 * group_gather_time(cm, g, bytes);
}

}  // namespace infinipipe::cost
