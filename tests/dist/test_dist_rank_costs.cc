// Per-rank costs under mpirun: with the online refit each pipeline rank keeps its own time
// terms, which travel in the plan. A rank made slow by the executor's test hook
// (common/slow_rank.h, injected through TrainOptions::action_hook) is timed slower in later plans
// than its fast neighbour, and every rank of the pipeline holds the very same plan bytes (so the
// same coefficients).
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_groups.h"
#include "common/slow_rank.h"
#include "data/synth.h"
#include "dist_test_util.h"
#include "dist_train_fixture.h"
#include "plan/plan_costs.h"
#include "plan/plan_json.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

class DistRankCosts : public disttest_fixture::DistTrainFixture {
 protected:
  TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const override {
    return options_base(pp, dp, schedule, iters, Optimizer::adamw, false);
  }
};

// Seconds the plan's cost model gives `rank` for one forward and backward of a 512-token
// sequence on a middle-stage shape (same layers, no embedding or head): compares ranks' terms.
double rank_reference_seconds(const cost::CostModel& cm, int32_t rank) {
  const cost::SliceShape seq{0, 512, true};
  const cost::StageShape st{2, false, false, rank};
  return cm.forward_time({&seq, 1}, st) + cm.backward_time({&seq, 1}, st);
}

TEST_F(DistRankCosts, SlowRankIsTimedSlowerAndEveryRankHoldsThePlan) {
  DIST_TEST_RANKS(2);
  ProcessGroups groups(disttest::test_comm(), 2, 1);
  // Ten iterations: the fit's steps are bounded per sample, so a 4x slowdown is caught up over
  // several iterations (about 1.5x after six).
  TrainOptions o = options(2, 1, Schedule::epp, 10);
  o.config.training.cost_model_update = CostModelUpdate::online;
  o.groups = &groups;
  o.action_hook = testing::slow_rank(0, 4);
  Trainer t(o);
  for (int i = 0; i < 10; ++i) t.step();

  const plan::Plan& p = t.last_plan();
  ASSERT_EQ(p.rank_time_terms.size(), 2u);
  // Each rank's measured costs outside its actions came with the plan: every rank steps its
  // optimizer, so every tail is positive.
  ASSERT_EQ(p.rank_step_terms.size(), 2u);
  for (const std::vector<double>& terms : p.rank_step_terms) EXPECT_GT(terms[1], 0.0);
  const cost::CostModel& cm = t.plan_cost_model();
  const double slow = rank_reference_seconds(cm, 0), fast = rank_reference_seconds(cm, 1);
  EXPECT_GT(slow, 1.5 * fast) << "rank 0 runs 4x slower; its fitted terms give " << slow
                              << " s, rank 1's " << fast << " s";
  // The same plan bytes on both ranks: the largest and smallest hash over the pipeline agree.
  const std::string text = plan::plan_to_json(p).dump();
  // 52 bits of the hash, exact in a double.
  const double hash = static_cast<double>(std::hash<std::string>{}(text) & ((1ULL << 52) - 1));
  std::array<double, 2> range = {hash, -hash};
  allreduce_max(groups.pp_comm(), range, 30.0, "the plan's hash");
  const double most = range[0], least = -range[1];
  EXPECT_EQ(most, least) << "the ranks of the pipeline hold different plans";
}

// A pp 2 run with the online fit saves after 3 iterations and goes on for 2; a new Trainer
// resumes from the checkpoint: each rank's fit, the pooled and per-rank terms and the terms the
// background planner had planned iteration 4 with are restored, so iterations 4 and 5 are planned
// with the very same bytes and give bit-identical losses and weights.
TEST_F(DistRankCosts, Pp2ResumePlansTheNextBatchesAsTheUninterruptedRun) {
  DIST_TEST_RANKS(2);
  Comm& comm = disttest::test_comm();
  // Lengths uniform in 1..1024: EPP packs short documents and slices long ones.
  const std::string corpus = corpus_write_shared("mixed", "uniform", 200, 1024, 5);
  ProcessGroups groups(comm, 2, 1);
  TrainOptions o = options(2, 1, Schedule::epp, 5);
  o.config.model.seq_length = 1024;
  o.config.training.data_path = corpus;
  o.config.training.cost_model_update = CostModelUpdate::online;
  o.config.training.save = (dir_ / "ckpt").string();
  o.groups = &groups;
  std::vector<std::string> plans;
  std::vector<double> losses;
  Run whole;
  {
    Trainer t(o);
    run(t, 3);
    t.save();
    for (int i = 0; i < 2; ++i) {
      const obs::IterationMetrics m = t.step();
      losses.push_back(m.loss);
      plans.push_back(plan::plan_to_json(t.last_plan()).dump());
    }
    whole = run(t, 0);
  }
  TrainOptions r = o;
  r.config.training.load = o.config.training.save;
  Trainer t(r);
  ASSERT_EQ(t.iteration(), 3);
  EXPECT_NE(t.cost_loop().resume_note().find("resumed the online cost fit"), std::string::npos)
      << t.cost_loop().resume_note();
  bool packs_or_slices = false;
  for (int i = 0; i < 2; ++i) {
    const obs::IterationMetrics m = t.step();
    EXPECT_EQ(plan::plan_to_json(t.last_plan()).dump(), plans[i])
        << "iteration " << m.iteration << " was planned differently after the resume";
    EXPECT_EQ(m.loss, losses[i]) << "iteration " << m.iteration;
    EXPECT_EQ(t.last_plan().rank_time_terms.size(), 2u);
    EXPECT_EQ(t.last_plan().rank_step_terms.size(), 2u);  // the step costs resumed too
    for (const plan::Chunk& c : t.last_plan().chunks)
      packs_or_slices |= c.slices.size() > 1 || c.kind() == plan::ChunkKind::split;
  }
  EXPECT_TRUE(packs_or_slices) << "the plans should pack or slice sequences";
  const Run rest = run(t, 0);
  for (const auto& [name, w] : whole.weights) {
    const auto& g = rest.weights.at(name);
    ASSERT_EQ(g.size(), w.size()) << name;
    EXPECT_EQ(std::memcmp(g.data(), w.data(), w.size() * sizeof(float)), 0)
        << "weights of " << name << " differ after resuming";
  }
}

}  // namespace
}  // namespace infinipipe::runtime
