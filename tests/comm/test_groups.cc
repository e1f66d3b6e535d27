#include <algorithm>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "comm/mpi_groups.h"
#include "core/error.h"
#include "mpi_test_util.h"

namespace infinipipe {
namespace {

TEST(RankLayout, MegatronOrderPp4Dp1) {
  for (int r = 0; r < 4; ++r) {
    RankLayout l = RankLayout::make(4, r, 4, 1);
    EXPECT_EQ(l.stage, r);
    EXPECT_EQ(l.replica, 0);
    EXPECT_EQ(l.is_first_stage(), r == 0);
    EXPECT_EQ(l.is_last_stage(), r == 3);
    EXPECT_EQ(l.next_rank(), (r + 1) % 4);
    EXPECT_EQ(l.prev_rank(), (r + 3) % 4);
    EXPECT_EQ(l.dp_group_ranks(), std::vector<int>{r});
    EXPECT_EQ(l.pp_group_ranks(), (std::vector<int>{0, 1, 2, 3}));
  }
  EXPECT_EQ(RankLayout::make(4, 2, 4, 1).describe(), "rank 2 (stage 2, replica 0)");
}

TEST(RankLayout, MegatronOrderPp2Dp2) {
  // Replicas of a stage are adjacent ranks; a pipeline strides by dp.
  const int stage[] = {0, 0, 1, 1}, replica[] = {0, 1, 0, 1};
  for (int r = 0; r < 4; ++r) {
    RankLayout l = RankLayout::make(4, r, 2, 2);
    EXPECT_EQ(l.stage, stage[r]);
    EXPECT_EQ(l.replica, replica[r]);
    EXPECT_EQ(l.rank_of(l.stage, l.replica), r);
    EXPECT_EQ(l.next_rank(), l.rank_of((l.stage + 1) % 2, l.replica));
  }
  RankLayout l1 = RankLayout::make(4, 1, 2, 2);
  EXPECT_EQ(l1.dp_group_ranks(), (std::vector<int>{0, 1}));
  EXPECT_EQ(l1.pp_group_ranks(), (std::vector<int>{1, 3}));
  EXPECT_EQ(l1.next_rank(), 3);
  EXPECT_EQ(l1.describe(3), "rank 3 (stage 1, replica 1)");
}

TEST(RankLayout, EveryRankHasOneSlot) {
  // Each (stage, replica) is held by exactly one rank, for every factorisation of 12.
  for (int pp : {1, 2, 3, 4, 6, 12}) {
    std::vector<int> seen(12, 0);
    for (int r = 0; r < 12; ++r) {
      RankLayout l = RankLayout::make(12, r, pp, 12 / pp);
      ASSERT_LT(l.stage, pp);
      ASSERT_LT(l.replica, 12 / pp);
      ++seen[static_cast<size_t>(l.stage * (12 / pp) + l.replica)];
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST(RankLayout, WorldSizeMismatchNamesTheFix) {
  try {
    RankLayout::make(6, 0, 4, 1);
    FAIL() << "a 6-rank world accepted pp 4 x dp 1";
  } catch (const ConfigError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("the job has 6 ranks"), std::string::npos) << m;
    EXPECT_NE(m.find("--pipeline-model-parallel-size 4 x --data-parallel-size 1 = 4"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("mpirun -np 4"), std::string::npos) << m;
    EXPECT_NE(m.find("(1,6), (2,3), (3,2), (6,1)"), std::string::npos) << m;
  }
  EXPECT_THROW(RankLayout::make(4, 0, 0, 4), ConfigError);
  try {
    RankLayout::make(1, 0, 2, 2);  // `infinipipe train --pp 2 --dp 2` without mpirun
    FAIL() << "one rank accepted pp 2 x dp 2";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("the job has 1 rank but"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mpirun -np 4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rank_layout_fitting_degrees(7), "(1,7), (7,1)");
}

// The communicators hold the ranks the layout says, in group order.
void check_groups(int64_t pp, int64_t dp) {
  Comm& comm = test::test_comm();
  ProcessGroups g(comm, pp, dp);
  const RankLayout& l = g.layout();
  int dp_rank = -1, dp_size = -1, pp_rank = -1, pp_size = -1;
  MPI_Comm_rank(g.dp_comm(), &dp_rank);
  MPI_Comm_size(g.dp_comm(), &dp_size);
  MPI_Comm_rank(g.pp_comm(), &pp_rank);
  MPI_Comm_size(g.pp_comm(), &pp_size);
  EXPECT_EQ(dp_size, dp);
  EXPECT_EQ(pp_size, pp);
  EXPECT_EQ(dp_rank, l.replica);
  EXPECT_EQ(pp_rank, l.stage);
  std::vector<int> dp_members(static_cast<size_t>(dp)), pp_members(static_cast<size_t>(pp));
  int me = comm.rank();
  MPI_Allgather(&me, 1, MPI_INT, dp_members.data(), 1, MPI_INT, g.dp_comm());
  MPI_Allgather(&me, 1, MPI_INT, pp_members.data(), 1, MPI_INT, g.pp_comm());
  EXPECT_EQ(dp_members, l.dp_group_ranks());
  EXPECT_EQ(pp_members, l.pp_group_ranks());
  EXPECT_EQ(comm_rank_name(), l.describe());
  // The embedding group: first and last stage of this pipeline only.
  if (l.is_first_stage() || l.is_last_stage()) {
    ASSERT_NE(g.embedding_comm(), MPI_COMM_NULL);
    std::vector<int> ends(2, -1);
    int size = 0;
    MPI_Comm_size(g.embedding_comm(), &size);
    ASSERT_EQ(size, pp > 1 ? 2 : 1);
    MPI_Allgather(&me, 1, MPI_INT, ends.data(), 1, MPI_INT, g.embedding_comm());
    EXPECT_EQ(ends[0], l.rank_of(0, l.replica));
    if (pp > 1) {
      EXPECT_EQ(ends[1], l.rank_of(int(pp) - 1, l.replica));
    }
  } else {
    EXPECT_EQ(g.embedding_comm(), MPI_COMM_NULL);
  }
}

// One mpirun for all the group checks: starting a job costs more than the checks.
TEST(MpiGroups, CommunicatorsMatchLayoutPp4Dp1AndPp2Dp2) {
  MPI_TEST_RANKS(4);
  {
    SCOPED_TRACE("pp 4 x dp 1");
    check_groups(4, 1);
  }
  {
    SCOPED_TRACE("pp 2 x dp 2");
    check_groups(2, 2);
  }
  EXPECT_THROW(ProcessGroups(test::test_comm(), 3, 1), ConfigError);
  EXPECT_THROW(ProcessGroups(test::test_comm(), 2, 4), ConfigError);
}

}  // namespace
}  // namespace infinipipe
