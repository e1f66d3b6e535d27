// The MPI side of a distributed rank's cost loop (cost_loop.h): where the rank sits, the sums and
// the gather it runs over the rank's groups, and where each rank of its pipeline runs.
#pragma once

#include <vector>

#include "core/config.h"
#include "cost/core_sharing.h"
#include "cost/pipeline_links.h"
#include "runtime/cost_loop.h"

namespace infinipipe {
class ProcessGroups;
}

namespace infinipipe::runtime {

// The run's degrees, and this rank's stage and replica (`groups` null: one process).
CostLoopRank cost_loop_rank(const Config& cfg, const ProcessGroups* groups);

// Sums over the pipeline and the world, the gather over the stage's replicas, each wait with the
// deadline `timeout_s`; none for one process (`groups` null).
CostLoopCollectives cost_loop_collectives(const ProcessGroups* groups, double timeout_s);

// Where each rank of this rank's pipeline runs: its node, the node's cores and ranks
// (collective over the world, then the pipeline).
std::vector<cost::RankHost> pipeline_rank_hosts(const ProcessGroups& groups, double timeout_s);
// `train --measure-links`: the links between every pair of hosts, measured (collective over the
// world; rank 0 prints them), as this rank's pipeline crosses them.
cost::PipelineLinks pipeline_links_measured(const ProcessGroups& groups, double timeout_s);

}  // namespace infinipipe::runtime
