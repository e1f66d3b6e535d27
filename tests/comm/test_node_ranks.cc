// node_ranks_all: every rank learns every rank's node, ranks and cores, each slot what that rank
// measured itself (one machine here: one node named 0 holding every rank).
#include <gtest/gtest.h>
#include <sched.h>

#include <thread>
#include <vector>

#include "comm/mpi_node.h"
#include "mpi_test_util.h"

namespace infinipipe {
namespace {

TEST(MpiNode, EveryRankLearnsEveryRanksNode) {
  MPI_TEST_RANKS(4);
  const MPI_Comm world = test::test_comm().world();
  const NodeRanks mine = node_ranks(world, 30);
  const std::vector<NodeRanks> all = node_ranks_all(world, 30);
  ASSERT_EQ(all.size(), 4u);
  const size_t me = static_cast<size_t>(test::test_comm().rank());
  EXPECT_EQ(all[me].node, mine.node);
  EXPECT_EQ(all[me].ranks, mine.ranks);
  EXPECT_EQ(all[me].cores, mine.cores);
  for (const NodeRanks& n : all) {
    EXPECT_EQ(n.node, 0);
    EXPECT_EQ(n.ranks, 4);
    EXPECT_GE(n.cores, 1);
    EXPECT_EQ(n.cores, all[0].cores);
  }
}

// Ranks pinned to a CPU each in turn (as `mpirun --map-by core --bind-to core` pins them) share
// only their CPU: ranks 0 and 2 on CPU 0, 1 and 3 on CPU 1, two groups of two ranks on one CPU.
TEST(MpiNode, PinnedRanksShareOnlyTheirCpu) {
  MPI_TEST_RANKS(4);
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two CPUs";
  const MPI_Comm world = test::test_comm().world();
  const int me = test::test_comm().rank();
  cpu_set_t before, pinned;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  CPU_ZERO(&pinned);
  CPU_SET(me % 2, &pinned);
  ASSERT_EQ(sched_setaffinity(0, sizeof(pinned), &pinned), 0);
  const std::vector<NodeRanks> all = node_ranks_all(world, 30);
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  ASSERT_EQ(all.size(), 4u);
  for (size_t r = 0; r < all.size(); ++r) {
    EXPECT_EQ(all[r].node, static_cast<int64_t>(r % 2)) << "rank " << r;
    EXPECT_EQ(all[r].ranks, 2) << "rank " << r;
    EXPECT_EQ(all[r].cores, 1) << "rank " << r;
  }
}

}  // namespace
}  // namespace infinipipe
