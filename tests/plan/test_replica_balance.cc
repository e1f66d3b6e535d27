// The slowest replica against the mean, on hand-computed cases.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "plan/replica_balance.h"

namespace infinipipe::plan {
namespace {

TEST(ReplicaImbalance, SlowestMeanAndRatioOfAHandComputedCase) {
  const std::vector<double> steps = {10, 20, 60, 30};  // mean 30
  const ReplicaImbalance r = replica_imbalance(steps);
  EXPECT_DOUBLE_EQ(r.slowest, 60);
  EXPECT_EQ(r.slowest_replica, 2);
  EXPECT_DOUBLE_EQ(r.mean, 30);
  EXPECT_DOUBLE_EQ(r.ratio, 2);
  EXPECT_EQ(replica_imbalance_line(r),
            "replicas: slowest 60.000 s (replica 2), mean 30.000 s, slowest/mean 2.000");
}

TEST(ReplicaImbalance, EqualReplicasAreBalancedAndBadInputIsAnError) {
  const std::vector<double> same = {4, 4, 4};
  EXPECT_DOUBLE_EQ(replica_imbalance(same).ratio, 1);
  EXPECT_EQ(replica_imbalance(same).slowest_replica, 0);
  EXPECT_THROW(replica_imbalance(std::vector<double>{}), Error);
  EXPECT_THROW(replica_imbalance(std::vector<double>{1, -1}), Error);
}

}  // namespace
}  // namespace infinipipe::plan
