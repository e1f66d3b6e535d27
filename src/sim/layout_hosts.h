// Where a searched layout's ranks run: the cost model one replica's plans are made with when the
// search knows the nodes and cores of the job's ranks (`train --pp auto` measures them) or the
// links between its hosts (cost/host_link_table.h), so a layout whose ranks share cores, or
// whose transfers cross a slow link, is ranked by the plans train will make for it in the
// layout's rank order (docs/cost-model.md, "Ranks sharing cores" and "Layout search").
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cost/cost_model.h"
#include "sim/layout_search.h"

namespace infinipipe::sim {

// The pipeline ranks' hosts of replica `replica` under `layout`, from one host per device in MPI
// rank order, the ranks in the layout's order (rank_in_order: Megatron's stage x dp + replica,
// or replica x pp + stage). Empty when `devices` is. ConfigError for a layout with Ulysses
// groups (the runtime runs none) or a device count that is not the layout's.
std::vector<cost::RankHost> layout_replica_hosts(std::span<const cost::RankHost> devices,
                                                 const Layout& layout, int64_t replica);

// The layout's devices as the host link table prices them: pp x dp ranks in its order, each a
// Ulysses group of consecutive devices.
cost::RankGrid layout_rank_grid(const Layout& layout);

// `cm` with replica `replica`'s ranks' hosts and, where `cm` has host links, its pipeline's
// links in the layout's order (CostModel::with_replica_links); `cm` itself when neither.
cost::CostModel layout_replica_cost_model(const cost::CostModel& cm, const LayoutSpace& space,
                                          const Layout& layout, int64_t replica);

}  // namespace infinipipe::sim
