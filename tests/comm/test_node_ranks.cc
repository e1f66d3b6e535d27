// node_ranks_all: every rank learns every rank's node, ranks and cores, each slot what that rank
// measured itself (one machine here: one node named 0 holding every rank).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace infinipipe
