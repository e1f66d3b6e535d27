// --use-distributed-optimizer under mpirun: each data-parallel replica keeps 1/dp of the optimizer
// state, yet losses and weights are bit-identical to the replicated optimizer's, checkpoints
// reshard to and from any layout (one process, no distributed optimizer), and the planner's
// memory prediction (optimizer part divided by dp) matches what the engine allocates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "comm/mpi_groups.h"
#include "core/error.h"
#include "dist_test_util.h"
#include "dist_train_fixture.h"
#include "plan/schedule_memory.h"
#include "runtime/dist_optimizer.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

class DistOptimizerTrain : public disttest_fixture::DistTrainFixture {
 protected:
  TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const override {
    TrainOptions o = options_base(pp, dp, schedule, iters, Optimizer::adamw, tied_);
    o.config.parallel.use_distributed_optimizer = true;
    return o;
  }

  // The same run with the replicated optimizer and with the distributed one: every loss and
  // every weight bit-identical; the distributed one holds its share of the optimizer state.
  void expect_bit_identical_to_replicated(int64_t pp, int64_t dp) {
    const std::string what = fmt::format("pp {} dp {}", pp, dp);
    ProcessGroups groups(disttest::test_comm(), pp, dp);
    TrainOptions o = options(pp, dp, Schedule::epp, 3);
    o.groups = &groups;
    TrainOptions replicated = o;
    replicated.config.parallel.use_distributed_optimizer = false;
    Trainer ref_t(replicated);
    const Run ref = run(ref_t, 3);
    Trainer t(o);
    const Run got = run(t, 3);
    for (size_t i = 0; i < ref.losses.size(); ++i)
      EXPECT_EQ(got.losses[i], ref.losses[i]) << what << ": loss of iteration " << i + 1;
    for (const auto& [name, w] : ref.weights) {
      const auto& g = got.weights.at(name);
      ASSERT_EQ(g.size(), w.size()) << what << ": " << name;
      EXPECT_EQ(std::memcmp(g.data(), w.data(), w.size() * sizeof(float)), 0)
          << what << ": weights of " << name;
    }
    // AdamW's two moments of this replica's share: 1/dp of the replicated state, to an element.
    const int64_t full = ref_t.tracker().current(MemCategory::mem_optimizer);
    const int64_t mine = t.tracker().current(MemCategory::mem_optimizer);
    EXPECT_GT(full, 0) << what;
    EXPECT_NEAR(static_cast<double>(mine), static_cast<double>(full) / dp, 8.0) << what;
  }

  bool tied_ = false;
};

TEST(ZeroPartition, EveryElementHasExactlyOneOwnerAndSharesDifferByAtMostOne) {
  const std::vector<std::vector<int64_t>> cases = {
      {10}, {3, 5, 7}, {1, 1, 1, 1, 1}, {64, 1, 4096, 7, 0, 33}, {2}};
  for (const auto& numels : cases) {
    for (int dp = 1; dp <= 5; ++dp) {
      int64_t total = 0;
      for (int64_t n : numels) total += n;
      std::vector<std::vector<int>> owners(numels.size());
      for (size_t i = 0; i < numels.size(); ++i)
        owners[i].assign(static_cast<size_t>(numels[i]), 0);
      int64_t least = total, most = 0;
      for (int r = 0; r < dp; ++r) {
        int64_t share = 0;
        for (const ZeroSlice& z : zero_owned_slices(numels, dp, r)) {
          ASSERT_GT(z.numel, 0);
          ASSERT_LE(z.offset + z.numel, numels[z.tensor]);
          for (int64_t e = z.offset; e < z.offset + z.numel; ++e) ++owners[z.tensor][size_t(e)];
          share += z.numel;
        }
        least = std::min(least, share);
        most = std::max(most, share);
      }
      for (const auto& t : owners)
        for (int n : t) EXPECT_EQ(n, 1) << "dp " << dp;
      EXPECT_LE(most - least, 1) << "dp " << dp;
    }
  }
  EXPECT_THROW(zero_owned_slices(std::vector<int64_t>{4}, 2, 2), Error);
}

TEST_F(DistOptimizerTrain, Pp2Dp2AndDp4AreBitIdenticalToTheReplicatedOptimizer) {
  DIST_TEST_RANKS(4);
  expect_bit_identical_to_replicated(2, 2);
  expect_bit_identical_to_replicated(1, 4);
}

TEST_F(DistOptimizerTrain, TiedEmbeddingsPp2Dp2AreBitIdenticalToTheReplicatedOptimizer) {
  DIST_TEST_RANKS(4);
  tied_ = true;
  expect_bit_identical_to_replicated(2, 2);
}

// A one-process checkpoint resumes on pp 2 × dp 2 with the distributed optimizer, whose
// checkpoint (states gathered whole) resumes in one process: the uninterrupted run's losses.
TEST_F(DistOptimizerTrain, Pp2Dp2ResumeReshards) {
  DIST_TEST_RANKS(4);
  expect_resume_reshards(2, 2, {}, [](const std::string& dir) {
    CheckpointReader r(dir);
    EXPECT_EQ(r.optimizer_kind(), "adamw");
    EXPECT_EQ(r.num_ranks(), 4);
  });
}

TEST_F(DistOptimizerTrain, Pp2Dp2ResumeIsBitIdentical) {
  DIST_TEST_RANKS(4);
  ProcessGroups groups(disttest::test_comm(), 2, 2);
  TrainOptions o = options(2, 2, Schedule::epp, 4);
  o.groups = &groups;
  expect_resume_bit_identical_with(o, "pp 2 dp 2, distributed optimizer");
}

// The plan's static memory divides the optimizer part by dp, and the measured peak stays within
// 5% of the prediction.
TEST_F(DistOptimizerTrain, Dp2PlanCountsTheShardedStateAndMeasuredPeakMatches) {
  DIST_TEST_RANKS(2);
  ProcessGroups groups(disttest::test_comm(), 1, 2);
  TrainOptions o = options(1, 2, Schedule::epp, 3);
  o.groups = &groups;
  o.config.model.num_layers = 8;
  o.config.training.global_batch_size = 16;
  o.config.validate();
  EXPECT_EQ(plan::plan_optimizer_dp(o.config), 2);
  TrainOptions replicated = o;
  replicated.config.parallel.use_distributed_optimizer = false;
  Trainer ref_t(replicated);
  Trainer t(o);
  for (int i = 0; i < 3; ++i) {
    const obs::IterationMetrics ref = ref_t.step();
    const obs::IterationMetrics m = t.step();
    if (i == 0) continue;  // the first step allocates the optimizer state after its peak
    const std::string what = fmt::format("rank {} iteration {}", groups.layout().rank, m.iteration);
    const int64_t state = ref_t.tracker().current(MemCategory::mem_optimizer);
    // One replica's share of AdamW's moments less in the plan, up to rounding.
    EXPECT_NEAR(static_cast<double>(ref.predicted_peak_bytes - m.predicted_peak_bytes),
                static_cast<double>(state) / 2, 64.0)
        << what;
    const double err =
        static_cast<double>(m.measured_peak_bytes) / static_cast<double>(m.predicted_peak_bytes) -
        1.0;
    EXPECT_LE(std::fabs(err), 0.05) << what << ": measured " << m.measured_peak_bytes
                                    << " B, predicted " << m.predicted_peak_bytes << " B";
  }
}

}  // namespace
}  // namespace infinipipe::runtime
