// --rank-placement: the pipelines order puts a pipeline's stages on adjacent ranks, and auto
// takes the order that sends fewer bytes between hosts (Megatron's on a tie or on one host).
#include <gtest/gtest.h>

#include <vector>

#include "comm/mpi_groups.h"
#include "setup/rank_order_bytes.h"

namespace infinipipe {
namespace {

using setup::PlacementChoice;
using setup::rank_placement_choose;

TEST(RankPlacement, PipelinesOrderPutsAPipelineOnAdjacentRanks) {
  for (int rank = 0; rank < 6; ++rank) {
    const RankLayout l = RankLayout::make(6, rank, 3, 2, RankOrder::pipelines);
    EXPECT_EQ(l.stage, rank % 3) << rank;
    EXPECT_EQ(l.replica, rank / 3) << rank;
    EXPECT_EQ(l.rank_of(l.stage, l.replica), rank);
  }
  const RankLayout l = RankLayout::make(6, 4, 3, 2, RankOrder::pipelines);
  EXPECT_EQ(l.pp_group_ranks(), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(l.dp_group_ranks(), (std::vector<int>{1, 4}));
  EXPECT_EQ(l.prev_rank(), 3);
  EXPECT_EQ(l.next_rank(), 5);
}

// Two hosts of two ranks (mpirun's usual order): Megatron's keeps the all-reduce inside the
// hosts and sends every hop across; pipelines the reverse.
TEST(RankPlacement, AutoKeepsTheHeavierTrafficInsideHosts) {
  const std::vector<int64_t> hosts{0, 0, 1, 1};
  const PlacementChoice heavy_hops = rank_placement_choose(hosts, 2, 2, 1e6, 8e6);
  EXPECT_EQ(heavy_hops.order, RankOrder::pipelines);
  EXPECT_DOUBLE_EQ(heavy_hops.megatron_cross_bytes, 2 * 8e6);         // two pipelines cross
  EXPECT_DOUBLE_EQ(heavy_hops.pipelines_cross_bytes, 2 * (2 * 1e6));  // two rings, 2 hosts
  EXPECT_NE(heavy_hops.reason.find("pipelines on adjacent ranks"), std::string::npos);
  const PlacementChoice heavy_grads = rank_placement_choose(hosts, 2, 2, 1e9, 8e6);
  EXPECT_EQ(heavy_grads.order, RankOrder::megatron);
  EXPECT_NE(heavy_grads.reason.find("Megatron's order"), std::string::npos);
  const PlacementChoice one_host = rank_placement_choose({0, 0, 0, 0}, 2, 2, 1e6, 8e6);
  EXPECT_EQ(one_host.order, RankOrder::megatron);
  EXPECT_NE(one_host.reason.find("one host"), std::string::npos);
}

}  // namespace
}  // namespace infinipipe
