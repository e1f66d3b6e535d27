#include "comm/mpi_node.h"

#include <sched.h>

#include <thread>
#include <vector>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_comm.h"

namespace infinipipe {

namespace {

// 1 for every CPU this process may run on; where the mask cannot be read, the first
// hardware_concurrency CPUs.
std::vector<int64_t> affinity_cpus() {
  std::vector<int64_t> cpus(CPU_SETSIZE, 0);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) cpus[c] = CPU_ISSET(c, &set) ? 1 : 0;
    return cpus;
  }
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned c = 0; c < n && c < CPU_SETSIZE; ++c) cpus[c] = 1;
  return cpus;
}

}  // namespace

NodeRanks node_ranks(MPI_Comm comm, double timeout_s) {
  int me = 0;
  mpi_check(MPI_Comm_rank(comm, &me), "reading this rank's number");
  MPI_Comm node = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node),
            "grouping the ranks of this node");
  int size = 1, lowest = me, first = 0;
  mpi_check(MPI_Comm_size(node, &size), "counting the ranks of this node");
  // Keyed by rank, the node's rank 0 is its lowest; translating it needs no message.
  MPI_Group node_group = MPI_GROUP_NULL, comm_group = MPI_GROUP_NULL;
  mpi_check(MPI_Comm_group(node, &node_group), "reading this node's group");
  mpi_check(MPI_Comm_group(comm, &comm_group), "reading the communicator's group");
  mpi_check(MPI_Group_translate_ranks(node_group, 1, &first, comm_group, &lowest),
            "naming this node by its lowest rank");
  MPI_Group_free(&node_group);
  MPI_Group_free(&comm_group);
  std::vector<int64_t> cpus = affinity_cpus();
  allreduce_sum(node, std::span<int64_t>(cpus), timeout_s, "the CPUs of this node's ranks");
  MPI_Comm_free(&node);
  NodeRanks out;
  out.node = lowest;
  out.ranks = size;
  out.cores = 0;
  for (const int64_t c : cpus) out.cores += c > 0 ? 1 : 0;
  return out;
}

}  // namespace infinipipe
