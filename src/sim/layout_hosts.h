// Where a searched layout's ranks run: the cost model one replica's plans are made with when the
// search knows the nodes and cores of the job's ranks (`train --pp auto` measures them), so a
// layout whose ranks share cores is ranked by the plans train will make for it
// (docs/cost-model.md, "Ranks sharing cores" and "Layout search").
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cost/cost_model.h"
#include "sim/layout_search.h"

namespace infinipipe::sim {

// The pipeline ranks' hosts of replica `replica` under `layout`, from one host per device in MPI
// rank order (rank = stage x dp + replica, the runtime's order). Empty when `devices` is.
// ConfigError for a layout with Ulysses groups (the runtime runs none) or a device count that is
// not the layout's.
std::vector<cost::RankHost> layout_replica_hosts(std::span<const cost::RankHost> devices,
                                                 const Layout& layout, int64_t replica);

// `cm` with those hosts (`cm` itself when there are none).
cost::CostModel layout_replica_cost_model(const cost::CostModel& cm, const LayoutSpace& space,
                                          const Layout& layout, int64_t replica);

}  // namespace infinipipe::sim
