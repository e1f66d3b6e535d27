// EPP on virtual stages under mpirun: parallelism never changes the maths (invariant 1 of
// docs/architecture.md). pp 2 and pp 4 ranks with vpp 2 run EPP plans whose chunks are slices of
// long sequences, hybrid and packed chunks in several consecutive pipelines, with and without
// recompute, and get the loss and gradients of one engine running every sequence whole; the
// Trainer plans EPP on its virtual stages under a tight budget (so it slices and recomputes) and
// trains to the one-process losses and weights, its measured peak memory within 5% of the plan's.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_groups.h"
#include "comm/mpi_p2p.h"
#include "common/plan_engines.h"
#include "common/random_tokens.h"
#include "common/reference_run.h"
#include "common/tensor_close.h"
#include "common/tiny_model.h"
#include "cost/cost_model.h"
#include "data/synth.h"
#include "dist_test_util.h"
#include "dist_train_fixture.h"
#include "matrix_budget.h"
#include "plan/schedule.h"
#include "plan/stage_layout.h"
#include "plan/validate.h"
#include "profile/profile.h"
#include "runtime/dist_step.h"

namespace infinipipe::runtime {
namespace {

constexpr int32_t kVpp = 2;
constexpr uint64_t kVstageSeed = 7;
const std::vector<int64_t> kVstageLengths{256, 40, 17, 200, 5, 96, 2, 130, 64, 31, 150, 77};

Config vstage_config(int64_t pp) {
  Config c;
  // Two layers per virtual stage: recompute 0, 1 or 2.
  c.model = testing::tiny_train_model(2 * pp * kVpp);
  c.model.tie_embeddings = false;
  c.parallel.pipeline_parallel = pp;
  c.parallel.schedule = Schedule::epp;
  c.parallel.virtual_stages = kVpp;
  c.parallel.min_tail_slice = 16;
  c.training.global_batch_size = static_cast<int64_t>(kVstageLengths.size());
  c.cluster.device = "cpu";
  c.validate();
  return c;
}

// Three pipelines: sequence 0 in four slices (three split chunks, the tail hybrid with a short
// sequence); sequence 3 in three slices, its tail with two short ones, then two packed chunks;
// then packed short sequences. recompute: every (stage, chunk) recomputes 0, 1 or all layers.
plan::Plan hand_made_plan(const Config& cfg, const cost::CostModel& cm, bool recompute) {
  using S = plan::Slice;
  auto sl = [](int32_t q, int64_t off, int64_t len) { return S{q, off, len, kVstageLengths[q]}; };
  const std::vector<std::pair<int32_t, std::vector<S>>> chunks{
      {0, {sl(0, 0, 64)}},
      {0, {sl(0, 64, 64)}},
      {0, {sl(0, 128, 64)}},
      {0, {sl(0, 192, 64), sl(4, 0, 5)}},
      {1, {sl(3, 0, 80)}},
      {1, {sl(3, 80, 60)}},
      {1, {sl(3, 140, 60), sl(6, 0, 2), sl(1, 0, 40)}},
      {1, {sl(5, 0, 96)}},
      {1, {sl(7, 0, 130)}},
      {2, {sl(2, 0, 17), sl(8, 0, 64)}},
      {2, {sl(9, 0, 31), sl(10, 0, 150)}},
      {2, {sl(11, 0, 77)}},
  };
  plan::Plan p;
  p.pp = static_cast<int32_t>(cfg.parallel.pipeline_parallel);
  p.vpp = kVpp;
  p.seq_lengths = kVstageLengths;
  for (const auto& [pipe, slices] : chunks) {
    plan::Chunk c;
    c.id = static_cast<int32_t>(p.chunks.size());
    c.slices = slices;
    p.chunks.push_back(c);
    p.pipeline_of_chunk.push_back(pipe);
  }
  p.stages = plan::stage_layout_uniform(cfg.model.num_layers, p.pp, p.vpp);
  plan::schedule_build(p, Schedule::epp);
  if (recompute)
    for (auto& list : p.actions)
      for (plan::Action& a : list) {
        const int32_t pick = (a.chunk + a.stage) % 3;
        a.recompute_layers = pick == 0   ? static_cast<int32_t>(p.stages[a.stage].num_layers)
                             : pick == 1 ? 1
                                         : 0;
      }
  plan::plan_predict(p, cm, cfg);
  plan::validate_or_throw(p, cm, cfg);
  return p;
}

void expect_hand_made_matches(int64_t pp, bool recompute) {
  Comm& comm = disttest::test_comm();
  const Config cfg = vstage_config(pp);
  const auto cm = cost::CostModel::from_config(cfg);
  const std::string what =
      fmt::format("pp {} vpp {} epp{}", pp, kVpp, recompute ? " with recompute" : "");
  const plan::Plan plan = hand_made_plan(cfg, cm, recompute);
  // The shape this test is about.
  int64_t split = 0, hybrid = 0, batched = 0, recomputing = 0;
  for (const plan::Chunk& c : plan.chunks) {
    split += c.kind() == plan::ChunkKind::split;
    hybrid += c.kind() == plan::ChunkKind::hybrid;
    batched += c.kind() == plan::ChunkKind::batched;
  }
  for (const auto& list : plan.actions)
    for (const plan::Action& a : list) recomputing += a.recompute_layers > 0;
  ASSERT_EQ(plan.num_stages(), pp * kVpp) << what;
  EXPECT_EQ(split, 5) << what;
  EXPECT_EQ(hybrid, 2) << what;
  EXPECT_EQ(batched, 5) << what;
  EXPECT_EQ(plan.num_pipelines(), 3) << what;
  EXPECT_EQ(recomputing > 0, recompute) << what;

  const auto seqs = testing::random_tokens(kVstageLengths, 256, 11);
  const testing::LossGrads ref = testing::reference_run(cfg.model, seqs, kVstageSeed);
  ProcessGroups groups(comm, pp, 1);
  const int32_t rank = groups.layout().stage;
  MemoryTracker tracker;
  const testing::PlanEngines engines =
      testing::plan_engines(cfg.model, plan, kVstageSeed, tracker, rank);
  ASSERT_EQ(engines.owned.size(), size_t(kVpp)) << what;
  P2p p2p(groups, comm.options().p2p_timeout_s);
  DistGradReducer grads(groups, engines.by_stage, 30.0, 64 << 10);
  const double scale = 1.0 / static_cast<double>(batch_predicted_tokens(kVstageLengths));
  const obs::StepStats stats = dist_execute_plan(plan, engines.by_stage, p2p, cfg.model.hidden_size,
                                                 tracker, seqs, scale, nullptr, 0, &grads);
  EXPECT_EQ(stats.timings.size(), plan.actions[static_cast<size_t>(rank)].size()) << what;
  for (const auto& e : engines.owned) EXPECT_EQ(e->num_stashed_chunks(), 0u) << what;
  std::vector<obs::EventTiming> buckets;
  grads.finish("the test's gradient all-reduce", buckets);
  const double loss_sum = allreduce_sum(comm.world(), stats.loss_sum, 30.0, "the test's loss sum");
  EXPECT_NEAR(loss_sum * scale, ref.loss, 1e-5 * std::fabs(ref.loss)) << what;
  for (const auto& e : engines.owned)
    for (const ParamRef& p : e->params().params())
      EXPECT_TRUE(
          testing::tensor_close({p.grad, static_cast<size_t>(p.numel)}, ref.grads.at(p.name), 1e-5))
          << what << ": gradient of " << p.name;
}

class DistEppVstages : public disttest_fixture::DistTrainFixture {
 protected:
  static constexpr int64_t kIters = 3;

  void write_long_corpus() { corpus_write_shared("long", "github", 64, 1024, 11); }

  // 2 layers per virtual stage, sequences up to 1024 tokens, adaptive recompute; epp with
  // vpp 2 (one process: the reference, vpp 1).
  TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const override {
    TrainOptions o = testing::tiny_train_options(2 * 4 * kVpp, iters, (dir_ / "long").string());
    Config& c = o.config;
    c.model.num_layers = 2 * pp_ * kVpp;
    c.model.seq_length = 1024;
    c.model.tie_embeddings = false;
    c.parallel.pipeline_parallel = pp;
    c.parallel.data_parallel = dp;
    c.parallel.schedule = schedule;
    c.parallel.virtual_stages = pp > 1 ? kVpp : 1;
    c.parallel.recompute_granularity = RecomputeGranularity::adaptive;
    c.training.lr = 3e-3;
    c.training.min_lr = 3e-4;
    c.training.lr_warmup_iters = 2;
    c.training.clip_grad = 1.0;
    c.training.seed = 9;
    c.training.optimizer = Optimizer::adamw;
    c.validate();
    return o;
  }

  // The budget a quarter of the way from the least that every batch's vpp-2 plan fits to the
  // unconstrained peak (the layout fixed as the Trainer fixes it), found on rank 0.
  int64_t tight_budget(const Config& cfg) const {
    Comm& comm = disttest::test_comm();
    int64_t budget = 0;
    if (comm.rank() == 0) {
      Config c = cfg;
      const cost::CostModel cm = profile::engine_cost_model(c);
      for (const plan::StageSpec& s : plan::stage_layout_uniform(
               c.model.num_layers, static_cast<int32_t>(c.parallel.pipeline_parallel), kVpp))
        c.parallel.stage_layers.push_back(s.num_layers);
      const auto range =
          disttest_matrix::budget_range(c, cm, disttest_matrix::replica_batches(c, cm, kIters));
      budget = disttest_matrix::budget_between(range, 0.25);
    }
    MPI_Bcast(&budget, 1, MPI_INT64_T, 0, comm.world());
    return budget;
  }

  void expect_trainer_matches(int64_t pp, int64_t dp) {
    Comm& comm = disttest::test_comm();
    pp_ = pp;
    write_long_corpus();
    const std::string what = fmt::format("pp {} dp {} vpp {} epp, tight budget", pp, dp, kVpp);
    Trainer ref_t(options(1, 1, Schedule::epp, kIters));
    const Run ref = run(ref_t, kIters);

    ProcessGroups groups(comm, pp, dp);
    TrainOptions o = options(pp, dp, Schedule::epp, kIters);
    o.groups = &groups;
    const int64_t budget = tight_budget(o.config);
    o.config.training.memory_budget = budget;
    Trainer t(o);
    Run got;
    int64_t split = 0, recompute = 0;
    for (int64_t i = 0; i < kIters; ++i) {
      const obs::IterationMetrics m = t.step();
      got.losses.push_back(m.loss);
      const plan::Plan& p = t.last_plan();
      EXPECT_EQ(p.vpp, kVpp) << what;
      EXPECT_EQ(p.schedule, "epp") << what;
      for (const plan::Chunk& c : p.chunks) split += c.kind() == plan::ChunkKind::split;
      for (const auto& list : p.actions)
        for (const plan::Action& a : list) recompute += a.recompute_layers > 0;
      EXPECT_LE(m.predicted_peak_bytes, budget) << what;
      // From iteration 2 on (the first allocates the AdamW state after its activations are gone).
      if (i > 0) {
        const double err = static_cast<double>(m.measured_peak_bytes) /
                               static_cast<double>(m.predicted_peak_bytes) -
                           1.0;
        EXPECT_LE(std::fabs(err), 0.05)
            << what << " rank " << comm.rank() << " iteration " << i + 1 << ": measured "
            << m.measured_peak_bytes << " B, predicted " << m.predicted_peak_bytes << " B";
      }
    }
    // The shape over the job (each replica plans its own share).
    int64_t shape[2] = {split, recompute};
    MPI_Allreduce(MPI_IN_PLACE, shape, 2, MPI_INT64_T, MPI_SUM, comm.world());
    EXPECT_GT(shape[0], 0) << what << ": the budget should make EPP slice";
    EXPECT_GT(shape[1], 0) << what << ": the budget should force recompute";
    for (const ParamRef& p : t.params()) got.weights[p.name].assign(p.value, p.value + p.numel);
    expect_near_rel(got.losses, ref.losses, what + ": loss");
    expect_weights_match(got, ref, what);
  }

  int64_t pp_ = 2;
};

TEST(DistEppVstagesExecutor, Pp2HandMadeSlicesAndPipelinesMatchOneEngine) {
  DIST_TEST_RANKS(2);
  omp_set_num_threads(1);
  expect_hand_made_matches(2, false);
  expect_hand_made_matches(2, true);
}

TEST(DistEppVstagesExecutor, Pp4HandMadeSlicesAndPipelinesMatchOneEngine) {
  DIST_TEST_RANKS(4);
  omp_set_num_threads(1);
  expect_hand_made_matches(4, false);
  expect_hand_made_matches(4, true);
}

TEST_F(DistEppVstages, Pp2TightBudgetMatchesOneProcessAndPredictsPeaks) {
  DIST_TEST_RANKS(2);
  expect_trainer_matches(2, 1);
}

TEST_F(DistEppVstages, Pp4TightBudgetMatchesOneProcessAndPredictsPeaks) {
  DIST_TEST_RANKS(4);
  expect_trainer_matches(4, 1);
}

// Two replicas, each planning its share of the batch on its own pipeline's virtual stages.
TEST_F(DistEppVstages, Pp2Dp2TightBudgetMatchesOneProcessAndPredictsPeaks) {
  DIST_TEST_RANKS(4);
  expect_trainer_matches(2, 2);
}

}  // namespace
}  // namespace infinipipe::runtime
