// The report's replica balance on a hand-computed run: per iteration traced on every replica,
// the slowest replica's step against the mean, predicted and measured.
#include <gtest/gtest.h>

#include "report/run_replicas.h"

namespace infinipipe::report {
namespace {

IterationCompare at(int64_t iteration, int32_t replica, double predicted, double measured) {
  IterationCompare ic;
  ic.iteration = iteration;
  ic.replica = replica;
  ic.predicted_step_s = predicted;
  ic.measured_step_s = measured;
  return ic;
}

TEST(RunReplicaBalance, SlowestAgainstTheMeanPerIterationTracedOnEveryReplica) {
  RunCompare c;
  c.dp = 2;
  c.iterations = {at(1, 0, 1.0, 2.0), at(1, 1, 3.0, 2.0), at(2, 0, 5.0, 5.0)};
  const auto rows = run_replica_balance(c);
  ASSERT_EQ(rows.size(), 1u) << "iteration 2 was traced on one replica only";
  EXPECT_EQ(rows[0].iteration, 1);
  EXPECT_DOUBLE_EQ(rows[0].predicted.slowest, 3.0);
  EXPECT_EQ(rows[0].predicted.slowest_replica, 1);
  EXPECT_DOUBLE_EQ(rows[0].predicted.mean, 2.0);
  EXPECT_DOUBLE_EQ(rows[0].predicted.ratio, 1.5);
  EXPECT_DOUBLE_EQ(rows[0].measured.ratio, 1.0);
  const nlohmann::json j = run_replica_balance_json(rows);
  EXPECT_DOUBLE_EQ(j.at(0).at("predicted").at("slowest_over_mean").get<double>(), 1.5);
  EXPECT_EQ(j.at(0).at("predicted").at("slowest_replica").get<int64_t>(), 1);
  EXPECT_DOUBLE_EQ(j.at(0).at("measured").at("mean_s").get<double>(), 2.0);
  EXPECT_NE(run_replica_balance_table(rows).find("| 1 | 3.0000 s (1) | 2.0000 s | 1.500 |"),
            std::string::npos)
      << run_replica_balance_table(rows);
}

TEST(RunReplicaBalance, OneReplicaHasNoRows) {
  RunCompare c;
  c.dp = 1;
  c.iterations = {at(1, 0, 1.0, 2.0)};
  EXPECT_TRUE(run_replica_balance(c).empty());
  EXPECT_EQ(run_replica_balance_table({}), "");
  EXPECT_TRUE(run_replica_balance_json({}).empty());
}

}  // namespace
}  // namespace infinipipe::report
