// The calibration file a distributed online run leaves holds every rank's fit: under pp 2 × dp 2
// each rank finds its own terms and step costs in it (and those of its pipeline's other rank),
// the shared coefficients are the mean of the replicas' pooled fits, and a run started from the
// file plans its first batch with each rank's own terms.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_groups.h"
#include "core/error.h"
#include "cost/calibration.h"
#include "cost/online_fit.h"
#include "dist_test_util.h"
#include "dist_train_fixture.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

class DistCalibrationRanks : public disttest_fixture::DistTrainFixture {
 protected:
  TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const override {
    return options_base(pp, dp, schedule, iters, Optimizer::adamw, false);
  }
};

const cost::CalibrationRank& entry(const cost::Calibration& cal, int64_t stage, int64_t replica) {
  for (const cost::CalibrationRank& r : cal.ranks)
    if (r.stage == stage && r.replica == replica) return r;
  throw infinipipe::Error("the calibration has no entry for that rank");
}

TEST_F(DistCalibrationRanks, Pp2Dp2FileHoldsEveryRankAndStartsTheNextRunWithIt) {
  DIST_TEST_RANKS(4);
  Comm& comm = disttest::test_comm();
  ProcessGroups groups(comm, 2, 2);
  const RankLayout& l = groups.layout();
  TrainOptions o = options(2, 2, Schedule::epp, 3);
  o.config.training.cost_model_update = CostModelUpdate::online;
  o.config.training.save = (dir_ / "save").string();
  o.groups = &groups;
  std::vector<cost::Coefficients> learned;  // this pipeline's ranks, as its next plans use them
  cost::Coefficients pooled;
  {
    Trainer t(o);
    run(t, 3);
    online_calibration_write(t.driver());
    learned = t.cost_loop().next_plan_cost_model().rank_coefficients();
    pooled = t.cost_loop().next_plan_cost_model().coefficients();
  }
  comm.barrier("the calibration file");
  const std::string file = (dir_ / "save" / kOnlineCalibrationFile).string();
  const cost::Calibration cal = cost::load_calibration(file);
  ASSERT_EQ(cal.pipeline_parallel, 2);
  ASSERT_EQ(cal.data_parallel, 2);
  ASSERT_EQ(cal.ranks.size(), 4u);
  ASSERT_EQ(learned.size(), 2u);
  for (int64_t s = 0; s < 2; ++s) {
    const cost::CalibrationRank& e = entry(cal, s, l.replica);
    const cost::Coefficients& want = learned[static_cast<size_t>(s)];
    EXPECT_EQ(cost::online_terms_get(e.coeffs), cost::online_terms_get(want))
        << "stage " << s << " of replica " << l.replica;
    EXPECT_EQ(e.coeffs.action_gap_s, want.action_gap_s);
    EXPECT_EQ(e.coeffs.step_tail_s, want.step_tail_s);
    // Every rank steps its optimizer: a measured tail, not a replica left out as zeros.
    EXPECT_GT(e.coeffs.step_tail_s, 0.0) << "stage " << s << " of replica " << l.replica;
  }
  // The shared terms: the mean over the replicas of their pipelines' pooled fits.
  std::array<double, cost::kNumOnlineTerms> mean = cost::online_terms_get(pooled);
  allreduce_sum(groups.dp_comm(), mean, 30.0, "the pooled terms");
  const auto shared = cost::online_terms_get(cal.coeffs);
  for (size_t i = 0; i < mean.size(); ++i)
    EXPECT_NEAR(shared[i], mean[i] / 2, 1e-12 * std::abs(mean[i])) << "term " << i;

  // The same layout started from the file: the first plan times each rank with its own entry.
  for (const CostModelUpdate update : {CostModelUpdate::off, CostModelUpdate::online}) {
    TrainOptions next = options(2, 2, Schedule::epp, 3);
    next.config.cluster.calibration = file;
    next.config.training.cost_model_update = update;
    next.groups = &groups;
    Trainer t(next);
    run(t, 1);
    const plan::Plan& p = t.last_plan();
    ASSERT_EQ(p.rank_time_terms.size(), 2u);
    ASSERT_EQ(p.rank_step_terms.size(), 2u);
    for (int64_t s = 0; s < 2; ++s) {
      const cost::Coefficients& want = entry(cal, s, l.replica).coeffs;
      const auto terms = cost::online_terms_get(want);
      EXPECT_EQ(p.rank_time_terms[static_cast<size_t>(s)],
                std::vector<double>(terms.begin(), terms.end()))
          << "stage " << s << " of replica " << l.replica;
      EXPECT_EQ(p.rank_step_terms[static_cast<size_t>(s)],
                (std::vector<double>{want.action_gap_s, want.step_tail_s}));
    }
    EXPECT_EQ(cost::online_terms_get(t.cost_loop().prior().coefficients()), shared);
  }
}

}  // namespace
}  // namespace infinipipe::runtime
