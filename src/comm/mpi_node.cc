#include "comm/mpi_node.h"

#include <sched.h>

#include <thread>
#include <vector>

#include "comm/cpu_groups.h"
#include "comm/mpi_allreduce.h"
#include "comm/mpi_comm.h"

namespace infinipipe {

namespace {

// The CPUs this process may run on; where the mask cannot be read, the first
// hardware_concurrency CPUs.
CpuMask affinity_mask() {
  CpuMask mask(CPU_SETSIZE / 64, 0);
  cpu_set_t set;
  CPU_ZERO(&set);
  const bool read = sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0;
  const int n = read ? CPU_SETSIZE
                     : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int c = 0; c < n && c < CPU_SETSIZE; ++c)
    if (!read || CPU_ISSET(c, &set)) mask[static_cast<size_t>(c / 64)] |= uint64_t{1} << (c % 64);
  return mask;
}

// Every rank's mask on `node`, by its rank there: each fills its slot of one summed vector.
std::vector<CpuMask> node_masks(MPI_Comm node, double timeout_s) {
  int me = 0, size = 1;
  mpi_check(MPI_Comm_rank(node, &me), "reading this rank's number on its node");
  mpi_check(MPI_Comm_size(node, &size), "counting the ranks of this node");
  const CpuMask mine = affinity_mask();
  const size_t words = mine.size();
  std::vector<int64_t> all(static_cast<size_t>(size) * words, 0);
  for (size_t w = 0; w < words; ++w)
    all[static_cast<size_t>(me) * words + w] = static_cast<int64_t>(mine[w]);
  allreduce_sum(node, std::span<int64_t>(all), timeout_s, "the CPUs of this node's ranks");
  std::vector<CpuMask> out(static_cast<size_t>(size), CpuMask(words, 0));
  for (size_t r = 0; r < out.size(); ++r)
    for (size_t w = 0; w < words; ++w) out[r][w] = static_cast<uint64_t>(all[r * words + w]);
  return out;
}

}  // namespace

NodeRanks node_ranks(MPI_Comm comm, double timeout_s) {
  int me = 0;
  mpi_check(MPI_Comm_rank(comm, &me), "reading this rank's number");
  MPI_Comm node = MPI_COMM_NULL;
  mpi_check(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node),
            "grouping the ranks of this node");
  int here = 0;
  mpi_check(MPI_Comm_rank(node, &here), "reading this rank's number on its node");
  const CpuGroup group = cpu_group(node_masks(node, timeout_s), here);
  // Keyed by rank, the node's ranks keep their order; translating needs no message.
  int first = static_cast<int>(group.first), lowest = me;
  MPI_Group node_group = MPI_GROUP_NULL, comm_group = MPI_GROUP_NULL;
  mpi_check(MPI_Comm_group(node, &node_group), "reading this node's group");
  mpi_check(MPI_Comm_group(comm, &comm_group), "reading the communicator's group");
  mpi_check(MPI_Group_translate_ranks(node_group, 1, &first, comm_group, &lowest),
            "naming this rank's CPUs by their lowest rank");
  MPI_Group_free(&node_group);
  MPI_Group_free(&comm_group);
  MPI_Comm_free(&node);
  NodeRanks out;
  out.node = lowest;
  out.ranks = group.ranks;
  out.cores = group.cores;
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
