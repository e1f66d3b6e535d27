// Which MPI ranks share a node, and its cores: MPI's shared-memory communicator
// (MPI_COMM_TYPE_SHARED) groups the ranks of one machine, whatever the launcher's host file or
// slot count says; the cores are the union of their CPU affinity masks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace infinipipe {

struct NodeRanks {
  int64_t node = 0;   // the lowest `comm` rank on this rank's node: equal on one node
  int64_t ranks = 1;  // ranks of `comm` on this node, this one included
  int64_t cores = 1;  // CPUs any rank of the node may run on (the union of their affinities)
};

// Collective over `comm`: every rank must call it. Waits at most timeout_s for the node's ranks.
NodeRanks node_ranks(MPI_Comm comm, double timeout_s);

// Every rank's node_ranks, by `comm` rank: what a rank planning for others needs to know where
// they run. Collective over `comm`, like node_ranks.
std::vector<NodeRanks> node_ranks_all(MPI_Comm comm, double timeout_s);

}  // namespace infinipipe
