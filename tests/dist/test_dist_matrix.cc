// Parallelism never changes the maths (invariant 1 of docs/architecture.md), tested where EPP is
// hard: documents up to 1024 tokens with a long tail, under a memory budget the planner finds
// tight (between the least budget that fits and the unconstrained peak), so EPP slices long
// sequences, packs short ones and recomputes. Every case of pp {2, 4} × dp {1, 2} × every schedule
// × {budget alone, tied embeddings, the distributed optimizer} runs several AdamW steps on
// pp × dp ranks: the plans the Trainer ran have the shape the budget claims, and losses and
// weights equal one process training the same batches with no budget, to fp32 round-off. On
// eight ranks (pp 4 × dp 2) the budget alone: tied embeddings join a pipeline's two ends (met at
// pp 4 × dp 1 and pp 2 × dp 2), the distributed optimizer shards over the replicas (met at
// pp 2 × dp 2), and eight ranks on two cores take twice a four-rank job's time. Each
// pp × dp × variant is its own ctest test (one mpirun job, all schedules against one reference);
// a failure names the schedule.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_groups.h"
#include "data/synth.h"
#include "dist_test_util.h"
#include "dist_train_fixture.h"
#include "matrix_budget.h"
#include "plan/schedule_table.h"
#include "profile/profile.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

constexpr int64_t kMatrixIters = 3;
constexpr int64_t kSeqLength = 1024;
// Where the budget sits between the least that fits and the unconstrained peak: low enough that
// every schedule must recompute (at the peak none does), high enough to leave the planner a
// choice of slicing and packing.
constexpr double kBudgetFraction = 0.25;

// Every variant trains under the tight budget; tied and dist_optimizer add their feature.
enum class Variant { budget, tied, dist_optimizer };

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::budget:
      return "budget";
    case Variant::tied:
      return "tied";
    case Variant::dist_optimizer:
      return "dist_optimizer";
  }
  return "?";
}

// One mpirun job: every schedule on one layout and variant, against one reference run.
struct MatrixGroup {
  int64_t pp = 1, dp = 1;
  Variant variant = Variant::budget;
};

std::string group_name(const MatrixGroup& g) {
  return fmt::format("pp{}_dp{}_{}", g.pp, g.dp, variant_name(g.variant));
}

// How gtest shows a case's parameter.
void PrintTo(const MatrixGroup& g, std::ostream* os) {
  *os << group_name(g);
}

// Interleaved last: on pp 4 it trains a deeper model, with a reference of its own.
constexpr Schedule kSchedules[] = {Schedule::epp, Schedule::one_f_one_b, Schedule::gpipe,
                                   Schedule::seq1f1b, Schedule::interleaved};

std::vector<MatrixGroup> matrix_groups() {
  std::vector<MatrixGroup> out;
  for (const auto& [pp, dp] :
       std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {2, 2}, {4, 1}, {4, 2}}) {
    for (Variant v : {Variant::budget, Variant::tied, Variant::dist_optimizer}) {
      if (v == Variant::dist_optimizer && dp == 1) continue;  // nothing to shard
      if (v != Variant::budget && pp * dp == 8) continue;     // see the top of this file
      out.push_back({pp, dp, v});
    }
  }
  return out;
}

// What the plans of the iterations held: chunks by kind, and actions that recompute.
struct PlanShape {
  int64_t split = 0, hybrid = 0, batched = 0, recompute = 0;
  void add(const plan::Plan& p) {
    for (const plan::Chunk& c : p.chunks) {
      const plan::ChunkKind k = c.kind();
      split += k == plan::ChunkKind::split;
      hybrid += k == plan::ChunkKind::hybrid;
      batched += k == plan::ChunkKind::batched;
    }
    for (const auto& list : p.actions)
      for (const plan::Action& a : list) recompute += a.recompute_layers > 0;
  }
};

// Waits until every rank, rank 0 included, has reached this point, sleeping between checks so
// that rank 0, working alone, keeps the cores. The Comm's barrier gives up after the p2p
// deadline, which rank 0's work may pass on a crowded machine.
void wait_for_rank0(Comm& comm, const std::string& what) {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Ibarrier(comm.world(), &req);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(200);
  for (int done = 0; !done;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "rank 0 never finished " << what;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

class DistMatrix : public disttest_fixture::DistTrainFixture,
                   public ::testing::WithParamInterface<MatrixGroup> {
 protected:
  void SetUp() override {
    DistTrainFixture::SetUp();
    if (!disttest::under_mpirun()) return;
    corpus_write_shared("long", "github", 64, kSeqLength, 11);
  }

  // The group's model and training on the long corpus; no memory budget yet. Interleaved on
  // pp 4 needs 8 layers for its 8 virtual stages; its reference trains the same model.
  TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const override {
    const MatrixGroup& g = GetParam();
    TrainOptions o = testing::tiny_train_options(layers_, iters, (dir_ / "long").string());
    Config& c = o.config;
    c.model.seq_length = kSeqLength;
    c.model.tie_embeddings = g.variant == Variant::tied;
    c.parallel.pipeline_parallel = pp;
    c.parallel.data_parallel = dp;
    c.parallel.schedule = schedule;
    if (schedule == Schedule::interleaved) c.parallel.virtual_stages = 2;
    c.parallel.use_distributed_optimizer = g.variant == Variant::dist_optimizer && dp > 1;
    c.parallel.recompute_granularity = RecomputeGranularity::adaptive;
    c.training.lr = 3e-3;
    c.training.min_lr = 3e-4;
    c.training.lr_warmup_iters = 2;
    c.training.weight_decay = 0.01;
    c.training.clip_grad = 1.0;
    c.training.seed = 9;
    c.training.optimizer = Optimizer::adamw;
    c.validate();
    return o;
  }

  // One process trains the model with no budget; rank 0 runs it while the others wait, and
  // sends every rank the losses and weights.
  Run reference() const {
    Comm& comm = disttest::test_comm();
    Trainer t(options(1, 1, Schedule::epp, kMatrixIters));
    Run r;
    if (comm.rank() == 0) r = run(t, kMatrixIters);
    wait_for_rank0(comm, "the one-process reference");
    r.losses.resize(kMatrixIters);
    MPI_Bcast(r.losses.data(), kMatrixIters, MPI_DOUBLE, 0, comm.world());
    for (const ParamRef& p : t.params()) {
      std::vector<float>& w = r.weights[p.name];
      w.resize(static_cast<size_t>(p.numel));
      MPI_Bcast(w.data(), static_cast<int>(p.numel), MPI_FLOAT, 0, comm.world());
    }
    return r;
  }

  // The tight budget of `cfg`, found by rank 0's planner and sent to every rank.
  static int64_t tight_budget(const Config& cfg) {
    Comm& comm = disttest::test_comm();
    int64_t budget = 0;
    if (comm.rank() == 0) {
      const cost::CostModel cm = profile::engine_cost_model(cfg);
      const auto range = disttest_matrix::budget_range(
          cfg, cm, disttest_matrix::replica_batches(cfg, cm, kMatrixIters));
      budget = disttest_matrix::budget_between(range, kBudgetFraction);
    }
    wait_for_rank0(comm, "the tight budget");
    MPI_Bcast(&budget, 1, MPI_INT64_T, 0, comm.world());
    return budget;
  }

  // `schedule` on the group's layout under its tight budget: the shape of the plans, summed over
  // the replicas (each counted once, by its first stage), and this rank's losses and weights.
  Run run_tight(const ProcessGroups& groups, Schedule schedule, PlanShape& job_shape) const {
    const MatrixGroup& g = GetParam();
    const std::string what = fmt::format("{} {}", group_name(g), plan::schedule_name(schedule));
    TrainOptions o = options(g.pp, g.dp, schedule, kMatrixIters);
    o.groups = &groups;
    const int64_t budget = tight_budget(o.config);
    o.config.training.memory_budget = budget;
    Trainer t(o);
    Run r;
    PlanShape shape;
    for (int64_t i = 0; i < kMatrixIters; ++i) {
      r.losses.push_back(t.step().loss);
      const plan::Plan& p = t.last_plan();
      EXPECT_EQ(p.schedule, plan::schedule_name(schedule)) << what;
      EXPECT_EQ(p.pp, g.pp) << what;
      EXPECT_EQ(p.memory_budget, budget) << what;
      EXPECT_LE(*std::max_element(p.predicted_peak_bytes.begin(), p.predicted_peak_bytes.end()),
                budget)
          << what << ": iteration " << i + 1;
      if (groups.layout().stage == 0) shape.add(p);
    }
    for (const ParamRef& p : t.params()) r.weights[p.name].assign(p.value, p.value + p.numel);
    MPI_Allreduce(&shape, &job_shape, 4, MPI_INT64_T, MPI_SUM, groups.comm().world());
    return r;
  }

  int64_t layers_ = 4;
};

// The shape the tight budget must give each schedule's plans.
void expect_tight_shape(Schedule schedule, const PlanShape& s, const std::string& what) {
  const std::string counts = fmt::format(
      "{}: {} split, {} hybrid, {} batched chunks, {} actions "
      "recomputing",
      what, s.split, s.hybrid, s.batched, s.recompute);
  EXPECT_GT(s.recompute, 0) << counts;
  switch (schedule) {
    case Schedule::epp:  // slices long sequences and packs short ones
      EXPECT_GT(s.split, 0) << counts;
      EXPECT_GT(s.hybrid + s.batched, 0) << counts;
      break;
    case Schedule::seq1f1b:  // cuts every micro-batch along its tokens
      EXPECT_GT(s.split, 0) << counts;
      break;
    default:  // batch-level schedules never cut a sequence
      EXPECT_EQ(s.split + s.hybrid, 0) << counts;
      EXPECT_GT(s.batched, 0) << counts;
      break;
  }
}

TEST_P(DistMatrix, EverySchedulePlansTightAndMatchesOneProcess) {
  const MatrixGroup& g = GetParam();
  DIST_TEST_RANKS(static_cast<int>(g.pp * g.dp));
  ProcessGroups groups(disttest::test_comm(), g.pp, g.dp);
  Run ref;
  for (Schedule schedule : kSchedules) {
    const std::string what = fmt::format("{} {}", group_name(g), plan::schedule_name(schedule));
    SCOPED_TRACE(what);
    const int64_t layers = schedule == Schedule::interleaved ? std::max<int64_t>(4, 2 * g.pp) : 4;
    if (ref.losses.empty() || layers != layers_) {
      layers_ = layers;
      ref = reference();
    }
    PlanShape shape;
    const Run got = run_tight(groups, schedule, shape);
    // The shape is the job's, the same on every rank: rank 0 alone reports it.
    if (disttest::test_comm().rank() == 0) expect_tight_shape(schedule, shape, what);
    for (size_t i = 0; i < ref.losses.size(); ++i) {
      EXPECT_NEAR(got.losses[i], ref.losses[i], 1e-6 * std::fabs(ref.losses[i]))
          << what << ": loss of iteration " << i + 1;
    }
    expect_weights_match(got, ref, what);
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, DistMatrix, ::testing::ValuesIn(matrix_groups()),
                         [](const ::testing::TestParamInfo<MatrixGroup>& info) {
                           return group_name(info.param);
                         });

}  // namespace
}  // namespace infinipipe::runtime
