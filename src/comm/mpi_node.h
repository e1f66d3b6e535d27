// Which MPI ranks share cores, and how many: MPI's shared-memory communicator
// (MPI_COMM_TYPE_SHARED) groups the ranks of one machine, whatever the launcher's host file or
// slot count says, and their CPU affinity masks split it further where ranks are pinned to
// their own cores (comm/cpu_groups.h).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace infinipipe {

struct NodeRanks {
  int64_t node = 0;   // the lowest `comm` rank sharing this rank's CPUs: equal for all of them
  int64_t ranks = 1;  // ranks of `comm` sharing them, this one included
  int64_t cores = 1;  // the CPUs they share
};

// Collective over `comm`: every rank must call it. Waits at most timeout_s for the node's ranks.
NodeRanks node_ranks(MPI_Comm comm, double timeout_s);

// Every rank's node_ranks, by `comm` rank: what a rank planning for others needs to know where
// they run. Collective over `comm`, like node_ranks.
std::vector<NodeRanks> node_ranks_all(MPI_Comm comm, double timeout_s);

}  // namespace infinipipe
