#include "sim/layout_hosts.h"

#include "core/error.h"

namespace infinipipe::sim {

std::vector<cost::RankHost> layout_replica_hosts(std::span<const cost::RankHost> devices,
                                                 const Layout& layout, int64_t replica) {
  if (devices.empty()) return {};
  if (layout.ulysses != 1)
    fail_config(
        "the ranks' hosts place pp x dp layouts (what train runs), not {} with Ulysses groups",
        layout.describe());
  if (static_cast<int64_t>(devices.size()) != layout.pp * layout.dp)
    fail_config("{} hosts given for {} ({} ranks)", devices.size(), layout.describe(),
                layout.pp * layout.dp);
  if (replica < 0 || replica >= layout.dp)
    fail("internal: replica {} of {}", replica, layout.describe());
  std::vector<cost::RankHost> out;
  for (int64_t stage = 0; stage < layout.pp; ++stage)
    out.push_back(devices[static_cast<size_t>(
        rank_in_order(layout.order, layout.pp, layout.dp, stage, replica))]);
  return out;
}

cost::RankGrid layout_rank_grid(const Layout& layout) {
  return {layout.pp, layout.dp, layout.ulysses, layout.order};
}

cost::CostModel layout_replica_cost_model(const cost::CostModel& cm, const LayoutSpace& space,
                                          const Layout& layout, int64_t replica) {
  const cost::CostModel linked = cm.with_replica_links(layout_rank_grid(layout), replica);
  if (space.rank_hosts.empty()) return linked;
  return linked.with_rank_hosts(layout_replica_hosts(space.rank_hosts, layout, replica));
}

}  // namespace infinipipe::sim
