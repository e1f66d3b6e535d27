// Which of a node's ranks share which CPUs, from their affinity masks. Ranks pinned to the same
// CPUs (mpirun --bind-to core, more ranks than cores) share only those; ranks that may all run
// anywhere (--bind-to none) share the node's. The cost model's replay of ranks that share cores
// (cost/core_sharing.h) needs the group a rank competes in, not the whole node.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace infinipipe {

// One CPU set as bits: word w holds CPUs 64w .. 64w+63.
using CpuMask = std::vector<uint64_t>;

struct CpuGroup {
  int64_t first = 0;  // index (in the masks given) of the group's lowest rank: its name
  int64_t ranks = 1;  // ranks in the group, `me` included
  int64_t cores = 1;  // CPUs they may run on
};

// The group of masks[me]: the ranks linked to it by masks that share a CPU, one after another,
// and the union of their CPUs. Ranks pinned to the same cores form one group per core set;
// ranks free to run anywhere, one group of the node. An empty mask is its rank's own one CPU.
CpuGroup cpu_group(std::span<const CpuMask> masks, int64_t me);

}  // namespace infinipipe
