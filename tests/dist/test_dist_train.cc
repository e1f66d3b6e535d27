// The Trainer under mpirun: from the same seed and data, losses and weights after a few
// iterations match the one-process Trainer to fp32 round-off, and checkpoints reshard: a
// one-process checkpoint resumes on pp × dp ranks and a distributed one resumes in one process,
// both continuing with the uninterrupted run's losses; the same layout resumes bit for bit.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_groups.h"
#include "common/synth_corpus.h"
#include "cost/online_fit.h"
#include "data/synth.h"
#include "dist_test_util.h"
#include "dist_train_fixture.h"
#include "plan/schedule_table.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kIters = 3;

class DistTrain : public disttest_fixture::DistTrainFixture {
 protected:
  TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const override {
    return options_base(pp, dp, schedule, iters, optimizer_, false);
  }

  void expect_matches_one_process(int64_t pp, int64_t dp, Schedule schedule) {
    Comm& comm = disttest::test_comm();
    const std::string what = fmt::format("pp {} dp {} {}", pp, dp, plan::schedule_name(schedule));
    // The reference: every rank trains the whole model alone (EPP: the schedule must not
    // matter either, and interleaved does not run on one rank).
    Trainer ref_t(options(1, 1, Schedule::epp, kIters));
    const Run ref = run(ref_t, kIters);

    ProcessGroups groups(comm, pp, dp);
    TrainOptions o = options(pp, dp, schedule, kIters);
    o.groups = &groups;
    Trainer t(o);
    const Run got = run(t, kIters);
    expect_near_rel(got.losses, ref.losses, what + ": loss");
    expect_weights_match(got, ref, what);
  }

  // pp × dp ranks train 4 iterations; the same layout saves after 2, a new Trainer resumes
  // there and trains 2 more: losses and weights are bit-identical to the uninterrupted run.
  void expect_resume_bit_identical(int64_t pp, int64_t dp) {
    ProcessGroups groups(disttest::test_comm(), pp, dp);
    TrainOptions o = options(pp, dp, Schedule::epp, 4);
    o.groups = &groups;
    expect_resume_bit_identical_with(o, fmt::format("pp {} dp {}", pp, dp));
  }

  // EPP with adaptive recompute under a budget that forces recompute on longer sequences:
  // each rank's measured peak (the engine's accounting allocator) is within 5% of the plan's
  // prediction for its stage, both ways. From iteration 2 on: the first iteration allocates the
  // AdamW state only in its optimizer step, after the activations are gone.
  // Known gap (reported to the planner): a forward that recomputes every layer of its stage
  // builds one whole layer's stash transiently, which forward_transient_bytes does not count; at
  // budgets tight enough for the solver to choose that, measured exceeds predicted.
  // never_above: also measured <= predicted (every message still in flight is counted).
  void expect_peak_memory_predicted(int64_t pp, int64_t dp, int64_t batch, int64_t budget,
                                    bool never_above = false) {
    Comm& comm = disttest::test_comm();
    const std::string corpus = (dir_ / "long").string();
    if (comm.rank() == 0) {
      testing::synth_corpus_write_small(corpus, 200, 1024);
    }
    comm.barrier("the long corpus");
    ProcessGroups groups(comm, pp, dp);
    TrainOptions o = options(pp, dp, Schedule::epp, 3);
    o.groups = &groups;
    Config& c = o.config;
    c.model.num_layers = 8;
    c.model.seq_length = 1024;
    c.training.global_batch_size = batch;
    c.training.data_path = corpus;
    c.training.memory_budget = budget;
    c.parallel.recompute_granularity = RecomputeGranularity::adaptive;
    c.validate();
    Trainer t(o);
    int64_t recomputed = 0;
    for (int i = 0; i < 3; ++i) {
      const obs::IterationMetrics m = t.step();
      recomputed += m.recompute_layers;
      if (i == 0) continue;
      const std::string what =
          fmt::format("pp {} dp {} rank {} iteration {}", pp, dp, comm.rank(), m.iteration);
      ASSERT_GT(m.predicted_peak_bytes, 0) << what;
      EXPECT_LE(m.predicted_peak_bytes, budget) << what;
      const double err =
          static_cast<double>(m.measured_peak_bytes) / static_cast<double>(m.predicted_peak_bytes) -
          1.0;
      EXPECT_LE(std::fabs(err), 0.05) << what << ": measured " << m.measured_peak_bytes
                                      << " B, predicted " << m.predicted_peak_bytes << " B";
      if (never_above) {
        EXPECT_LE(m.measured_peak_bytes, m.predicted_peak_bytes) << what;
      }
    }
    EXPECT_GT(recomputed, 0) << "the budget should force recompute";
  }

  Optimizer optimizer_ = Optimizer::adamw;
};

TEST_F(DistTrain, Pp2MatchesOneProcess) {
  DIST_TEST_RANKS(2);
  expect_matches_one_process(2, 1, Schedule::epp);
  expect_matches_one_process(2, 1, Schedule::one_f_one_b);
}

TEST_F(DistTrain, Pp2OtherSchedulesMatchOneProcess) {
  DIST_TEST_RANKS(2);
  expect_matches_one_process(2, 1, Schedule::seq1f1b);
  expect_matches_one_process(2, 1, Schedule::interleaved);
}

TEST_F(DistTrain, Pp2Dp2SgdMatchesOneProcess) {
  DIST_TEST_RANKS(4);
  optimizer_ = Optimizer::sgd;
  expect_matches_one_process(2, 2, Schedule::epp);
}

// With the online refit each rank fits its own stage; the pipeline plans with the pooled terms,
// which travel with the plan: both ranks hold the same cost model, not the prior, and the
// training maths still match one process.
TEST_F(DistTrain, Pp2OnlineRefitIsSharedByThePipeline) {
  DIST_TEST_RANKS(2);
  TrainOptions ref_o = options(1, 1, Schedule::epp, kIters);
  ref_o.config.training.cost_model_update = CostModelUpdate::online;
  Trainer ref_t(ref_o);
  const Run ref = run(ref_t, kIters);
  ProcessGroups groups(disttest::test_comm(), 2, 1);
  TrainOptions o = options(2, 1, Schedule::epp, kIters);
  o.config.training.cost_model_update = CostModelUpdate::online;
  o.groups = &groups;
  Trainer t(o);
  const Run got = run(t, kIters);
  expect_near_rel(got.losses, ref.losses, "pp 2 online: loss");
  expect_weights_match(got, ref, "pp 2 online");
  const std::array<double, cost::kNumOnlineTerms> mine =
      cost::online_terms_get(t.plan_cost_model().coefficients());
  std::array<double, cost::kNumOnlineTerms> most = mine;
  allreduce_max(groups.pp_comm(), most, 30.0, "the planned time terms");
  EXPECT_EQ(mine, most) << "the ranks of the pipeline planned with different coefficients";
  EXPECT_NE(mine, cost::online_terms_get(t.cost_loop().prior().coefficients()));
  ASSERT_TRUE(t.cost_loop().calibration().has_value());
}

TEST_F(DistTrain, Pp2ResumeReshards) {
  DIST_TEST_RANKS(2);
  expect_resume_reshards(2, 1);
}

TEST_F(DistTrain, FourRanksMatchOneProcess) {
  DIST_TEST_RANKS(4);
  expect_matches_one_process(4, 1, Schedule::epp);
  expect_matches_one_process(2, 2, Schedule::epp);
  expect_matches_one_process(2, 2, Schedule::one_f_one_b);
}

TEST_F(DistTrain, Pp2Dp2ResumeReshards) {
  DIST_TEST_RANKS(4);
  expect_resume_reshards(2, 2);
}

TEST_F(DistTrain, Pp2ResumeIsBitIdentical) {
  DIST_TEST_RANKS(2);
  expect_resume_bit_identical(2, 1);
}

TEST_F(DistTrain, Pp2Dp2ResumeIsBitIdentical) {
  DIST_TEST_RANKS(4);
  expect_resume_bit_identical(2, 2);
}

TEST_F(DistTrain, Pp2PeakMemoryWithinFivePercentOfPlan) {
  DIST_TEST_RANKS(2);
  expect_peak_memory_predicted(2, 1, 8, 18 << 20, true);
}

// Four stages, where a pipeline keeps several messages in flight (plan::send_hold_start).
TEST_F(DistTrain, Pp4PeakMemoryWithinFivePercentOfPlan) {
  DIST_TEST_RANKS(4);
  expect_peak_memory_predicted(4, 1, 8, 14 << 20, true);
}

TEST_F(DistTrain, Pp2Dp2PeakMemoryWithinFivePercentOfPlan) {
  DIST_TEST_RANKS(4);
  expect_peak_memory_predicted(2, 2, 16, 18 << 20, true);
}

}  // namespace
}  // namespace infinipipe::runtime
