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

std::vector<NodeRanks> node_ranks_all(MPI_Comm comm, double timeout_s) {
  const NodeRanks mine = node_ranks(comm, timeout_s);
  int me = 0, size = 1;
  mpi_check(MPI_Comm_rank(comm, &me), "reading this rank's number");
  mpi_check(MPI_Comm_size(comm, &size), "counting the ranks");
  // Each rank fills its slot of one summed vector.
  std::vector<int64_t> all(static_cast<size_t>(size) * 3, 0);
  const size_t at = static_cast<size_t>(me) * 3;
  all[at] = mine.node;
  all[at + 1] = mine.ranks;
  all[at + 2] = mine.cores;
  allreduce_sum(comm, std::span<int64_t>(all), timeout_s, "the nodes of every rank");
  std::vector<NodeRanks> out;
  for (size_t r = 0; r < static_cast<size_t>(size); ++r)
    out.push_back({all[r * 3], all[r * 3 + 1], all[r * 3 + 2]});
  return out;
}

}  // namespace infinipipe
