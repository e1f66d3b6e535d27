// Ranks that share cores: more MPI ranks on a node than it has cores (the demo's pp 2 x dp 2 on
// two cores). Then an action's wall time depends on how many ranks compute at that moment: the
// operating system shares the node's cores among them (processor sharing), so an action
// progresses at min(1, cores / ranks computing) of its own speed. docs/cost-model.md, "Ranks
// sharing cores".
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace infinipipe::cost {

// Where one pipeline rank runs, measured by the runtime (MPI's shared-memory communicator and
// the CPU affinity of the node's ranks, comm/mpi_node.h), never assumed. A "node" here is the
// cores a set of ranks shares: a machine, or the cores some of its ranks are pinned to.
struct RankHost {
  int64_t node = 0;   // ranks with the same node share its cores
  int64_t cores = 0;  // cores the node's ranks may run on (>= 1)
  int64_t ranks = 0;  // MPI ranks on the node, of every pipeline (>= 1)
};

// True when some node holds more ranks than cores; false for an empty list.
bool cores_shared(std::span<const RankHost> hosts);

// The speed, as a fraction of its own, of each computing rank of one pipeline, given which of
// its ranks compute now (`computing[k]`, one per pipeline rank, as `hosts`). The node's other
// ranks belong to other pipelines (data-parallel replicas run the same schedule on their own
// batches), so a node holding P ranks of this pipeline and R ranks in all counts R / P ranks
// computing for each of its pipeline ranks that computes. 1 for every rank when no node holds
// more ranks than cores; 0 for a rank that does not compute.
std::vector<double> core_share_speeds(std::span<const RankHost> hosts,
                                      const std::vector<bool>& computing);

}  // namespace infinipipe::cost
