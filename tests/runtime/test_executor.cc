// The executor runs planner-made plans of every schedule and gives the loss and gradients of the
// plain computation (every sequence whole, no recompute) to fp32 round-off (invariant 1 of
// docs/architecture.md).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/least_budget.h"
#include "common/plan_engines.h"
#include "common/random_tokens.h"
#include "common/reference_run.h"
#include "common/tensor_close.h"
#include "common/tiny_model.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "plan/budget_error.h"
#include "plan/planner.h"
#include "plan/schedule.h"
#include "plan/schedule_table.h"
#include "plan/stage_layout.h"
#include "plan/validate.h"
#include "runtime/executor.h"

namespace infinipipe::runtime {
namespace {

Config tiny_config(int64_t pp = 1) {
  Config c;
  c.model = testing::tiny_train_model(2);
  c.parallel.pipeline_parallel = pp;
  c.parallel.min_tail_slice = 16;  // lets the planner cut sequences this short
  c.cluster.device = "cpu";
  c.validate();
  return c;
}

using testing::LossGrads;
using testing::random_tokens;
using testing::reference_run;

LossGrads grads_collect(double loss, const std::vector<std::unique_ptr<StageEngine>>& engines) {
  LossGrads o;
  o.loss = loss;
  for (const auto& e : engines) {
    for (const ParamRef& p : e->params().params()) {
      auto& g = o.grads[p.name];
      if (g.empty()) g.assign(static_cast<size_t>(p.numel), 0.0f);
      for (int64_t i = 0; i < p.numel; ++i) g[static_cast<size_t>(i)] += p.grad[i];
    }
  }
  return o;
}

LossGrads plan_run(const Config& cfg, const plan::Plan& p,
                   const std::vector<std::vector<int32_t>>& seqs) {
  MemoryTracker tracker;
  const testing::PlanEngines engines = testing::plan_engines(cfg.model, p, 7, tracker);
  const double scale = 1.0 / static_cast<double>(batch_predicted_tokens(p.seq_lengths));
  const std::vector<obs::StepStats> stats = execute_plan_local(p, engines.by_stage, seqs, scale);
  double loss_sum = 0;
  int64_t covered = 0;
  for (size_t r = 0; r < stats.size(); ++r) {
    loss_sum += stats[r].loss_sum;
    covered += stats[r].predicted_tokens;
    EXPECT_EQ(stats[r].timings.size(), p.actions[r].size());
    for (const obs::ActionTiming& t : stats[r].timings) {
      EXPECT_LE(t.start_s, t.end_s);
      // The thread's CPU time in the action: measured, and within its interval (1 ms of clock
      // granularity allowed).
      EXPECT_GE(t.cpu_s, 0.0);
      EXPECT_LE(t.cpu_s, t.end_s - t.start_s + 1e-3);
    }
  }
  EXPECT_EQ(covered, batch_predicted_tokens(p.seq_lengths));
  for (const auto& e : engines.owned) EXPECT_EQ(e->num_stashed_chunks(), 0u) << "stash left behind";
  return grads_collect(loss_sum * scale, engines.owned);
}

void expect_same_maths(const LossGrads& got, const LossGrads& want, const std::string& what) {
  EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::fabs(want.loss)) << what;
  ASSERT_EQ(got.grads.size(), want.grads.size()) << what;
  for (const auto& [name, w] : want.grads) {
    EXPECT_TRUE(testing::tensor_close(got.grads.at(name), w, 1e-5))
        << what << ": gradient of " << name;
  }
}

struct PlanShape {
  bool split = false, packed = false, hybrid = false;
  int32_t recompute = 0;
};

PlanShape plan_shape(const plan::Plan& p) {
  PlanShape s;
  for (const plan::Chunk& c : p.chunks) {
    s.split = s.split || c.kind() == plan::ChunkKind::split;
    s.hybrid = s.hybrid || c.kind() == plan::ChunkKind::hybrid;
    s.packed = s.packed || c.slices.size() > 1;
  }
  for (const auto& list : p.actions)
    for (const plan::Action& a : list) s.recompute += a.recompute_layers;
  return s;
}

std::string plan_describe(const plan::Plan& p) {
  std::string out;
  for (const plan::Chunk& c : p.chunks) {
    out += "[";
    for (const plan::Slice& s : c.slices)
      out += fmt::format(" s{}:{}+{}/{}", s.seq, s.offset, s.len, s.seq_len);
    out += " ] ";
  }
  for (const plan::Action& a : p.actions[0])
    if (a.kind == plan::ActionKind::forward) out += fmt::format("r{} ", a.recompute_layers);
  return out;
}

using testing::least_budget;

const std::vector<int64_t> kLengths{256, 40, 17, 200, 5, 96, 2, 130, 64, 31};

// One thread: the tests check maths, and OpenMP threads on a busy 2-core machine cost far more
// than they give for a model this small.
class Executor : public ::testing::Test {
 protected:
  void SetUp() override {
    threads_ = omp_get_max_threads();
    omp_set_num_threads(1);
  }
  void TearDown() override { omp_set_num_threads(threads_); }
  int threads_ = 1;
};

TEST_F(Executor, EppPlansUnderTightBudgetsMatchWholeSequences) {
  Config cfg = tiny_config();
  const auto cm = cost::CostModel::from_config(cfg);
  const auto seqs = random_tokens(kLengths, 256, 11);
  const LossGrads want = reference_run(cfg.model, seqs, 7);
  const int64_t least = least_budget(cfg, cm, kLengths);
  ASSERT_GT(least, 0);
  // From the smallest budget up: every plan gives the same maths, and at least one of them has
  // sliced sequences, packed chunks and recompute together (else this test proves little).
  bool all_cases = false;
  std::string seen;
  for (double f : {1.0, 1.1, 1.25, 1.5, 2.0, 3.0}) {
    cfg.training.memory_budget = static_cast<int64_t>(static_cast<double>(least) * f);
    const plan::Plan p = plan::make_plan(cfg, cm, kLengths);
    const PlanShape s = plan_shape(p);
    all_cases = all_cases || (s.split && s.packed && s.recompute > 0);
    seen += fmt::format("\nbudget x{}: {}", f, plan_describe(p));
    expect_same_maths(plan_run(cfg, p, seqs), want, fmt::format("epp, budget x{}", f));
  }
  EXPECT_TRUE(all_cases) << "no plan combines slices, packing and recompute:" << seen;
  // With room to spare (fewer chunks, no recompute) the maths are the same too.
  cfg.training.memory_budget = 0;
  expect_same_maths(plan_run(cfg, plan::make_plan(cfg, cm, kLengths), seqs), want, "epp roomy");
}

TEST_F(Executor, EveryScheduleAtOneStageMatchesWholeSequences) {
  const auto seqs = random_tokens(kLengths, 256, 12);
  for (Schedule sched : {Schedule::one_f_one_b, Schedule::gpipe, Schedule::seq1f1b}) {
    Config cfg = tiny_config();
    cfg.parallel.schedule = sched;
    if (sched == Schedule::seq1f1b) cfg.parallel.seq1f1b_slices = 3;
    const auto cm = cost::CostModel::from_config(cfg);
    const LossGrads want = reference_run(cfg.model, seqs, 7);
    const plan::Plan p = plan::make_plan(cfg, cm, kLengths);
    EXPECT_EQ(p.schedule, plan::schedule_name(sched));
    if (sched == Schedule::seq1f1b) {
      EXPECT_TRUE(plan_shape(p).split);
    }
    expect_same_maths(plan_run(cfg, p, seqs), want, plan::schedule_name(sched));
    // A static recompute of every layer changes nothing either.
    cfg.parallel.recompute_granularity = RecomputeGranularity::full;
    const plan::Plan full = plan::make_plan(cfg, cm, kLengths);
    EXPECT_GT(plan_shape(full).recompute, 0);
    expect_same_maths(plan_run(cfg, full, seqs), want,
                      std::string(plan::schedule_name(sched)) + " full");
  }
}

// Two pipeline stages in one process through the local link: what the distributed runtime will
// run over MPI, one rank per stage.
TEST_F(Executor, TwoStagePlansInProcessMatchWholeSequences) {
  const auto seqs = random_tokens(kLengths, 256, 13);
  for (Schedule sched : {Schedule::epp, Schedule::one_f_one_b, Schedule::seq1f1b}) {
    Config cfg = tiny_config(2);
    cfg.parallel.schedule = sched;
    const auto cm = cost::CostModel::from_config(cfg);
    const LossGrads want = reference_run(cfg.model, seqs, 7);
    const plan::Plan p = plan::make_plan(cfg, cm, kLengths);
    ASSERT_EQ(p.actions.size(), 2u);
    expect_same_maths(plan_run(cfg, p, seqs), want,
                      std::string("pp=2 ") + plan::schedule_name(sched));
  }
}

// The planner above never made a hybrid chunk (a tail slice packed with short sequences); a plan
// built by hand has them, with the slices of one sequence in 3 unequal pieces.
TEST_F(Executor, HandMadeHybridChunksMatchWholeSequences) {
  const std::vector<int64_t> lengths{200, 30, 7, 120, 2};
  const auto seqs = random_tokens(lengths, 256, 14);
  for (int64_t pp : {1, 2}) {
    Config cfg = tiny_config(pp);
    const auto cm = cost::CostModel::from_config(cfg);
    const LossGrads want = reference_run(cfg.model, seqs, 7);
    plan::Plan p;
    p.schedule = "epp";
    p.pp = static_cast<int32_t>(pp);
    p.seq_lengths = lengths;
    const std::vector<std::vector<plan::Slice>> chunks{
        {{0, 0, 90, 200}},
        {{0, 90, 70, 200}},
        {{0, 160, 40, 200}, {1, 0, 30, 30}, {4, 0, 2, 2}},  // hybrid
        {{3, 0, 50, 120}},
        {{3, 50, 70, 120}, {2, 0, 7, 7}},  // hybrid
    };
    for (size_t c = 0; c < chunks.size(); ++c)
      p.chunks.push_back({static_cast<int32_t>(c), chunks[c]});
    p.pipeline_of_chunk = {0, 0, 0, 1, 1};
    p.stages = plan::stage_layout_uniform(cfg.model.num_layers, p.pp, 1);
    p.actions.assign(static_cast<size_t>(pp), {});
    plan::schedule_build(p, Schedule::epp);
    int32_t r = 0;
    for (auto& list : p.actions)
      for (plan::Action& a : list) a.recompute_layers = (a.chunk + r++) % 2;  // varied recompute
    // Forward and backward of a chunk must agree on its recompute: copy the forward's.
    for (auto& list : p.actions) {
      std::map<std::pair<int32_t, int32_t>, int32_t> fwd;
      for (plan::Action& a : list) {
        if (a.kind == plan::ActionKind::forward)
          fwd[{a.stage, a.chunk}] = a.recompute_layers;
        else
          a.recompute_layers = fwd.at({a.stage, a.chunk});
      }
    }
    const auto check = plan::validate_structure(p, cfg);
    ASSERT_TRUE(check.ok()) << check.message();
    expect_same_maths(plan_run(cfg, p, seqs), want, fmt::format("hybrid, pp={}", pp));
  }
}

TEST_F(Executor, ChunkInputCarriesTheLabelLookahead) {
  const std::vector<std::vector<int32_t>> seqs{{1, 2, 3, 4, 5, 6}, {7, 8}};
  plan::Chunk c;
  c.id = 3;
  c.slices = {{0, 2, 3, 6}, {1, 0, 2, 2}};
  const ChunkInput in = executor_chunk_input(c, seqs);
  ASSERT_EQ(in.slices.size(), 2u);
  EXPECT_EQ(in.chunk_id, 3);
  EXPECT_EQ(in.slices[0].tokens, (std::vector<int32_t>{3, 4, 5, 6}));  // + label of token 5
  EXPECT_FALSE(in.slices[0].is_final());
  EXPECT_EQ(in.slices[1].tokens, (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(in.slices[1].is_final());
  c.slices = {{0, 4, 3, 6}};  // runs past the sequence
  EXPECT_THROW(executor_chunk_input(c, seqs), Error);
  c.slices = {{2, 0, 1, 1}};  // no such sequence
  EXPECT_THROW(executor_chunk_input(c, seqs), Error);
}

TEST_F(Executor, BrokenActionOrderIsAnErrorNotAHang) {
  Config cfg = tiny_config(2);
  cfg.parallel.schedule = Schedule::one_f_one_b;
  const auto cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> lengths{20, 30};
  const auto seqs = random_tokens(lengths, 256, 3);
  plan::Plan p = plan::make_plan(cfg, cm, lengths);
  // Stage 0 first waits for a gradient that needs its own forward: a deadlock, not a hang.
  auto& first = p.actions[0];
  std::stable_partition(first.begin(), first.end(),
                        [](const plan::Action& a) { return a.kind == plan::ActionKind::backward; });
  MemoryTracker tracker;
  const testing::PlanEngines engines = testing::plan_engines(cfg.model, p, 7, tracker);
  try {
    execute_plan_local(p, engines.by_stage, seqs, 0.01);
    FAIL() << "a deadlocked plan ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot progress"), std::string::npos) << e.what();
  }
}

TEST_F(Executor, LocalLinkRefusesAReceiveNobodySent) {
  LocalStageLink link;
  EXPECT_FALSE(link.has_activation(1, 0));
  EXPECT_THROW(link.recv_activation(1, 0), Error);
  EXPECT_THROW(link.recv_grad(0, 0), Error);
  MemoryTracker tracker;
  link.send_activation(0, 5, Tensor(tracker, MemCategory::mem_activations, {2, 3}));
  EXPECT_TRUE(link.has_activation(1, 5));
  EXPECT_EQ(link.recv_activation(1, 5).numel(), 6);
  EXPECT_EQ(link.pending(), 0u);
}

// The test hook is injected, not read from the environment: every action calls it once, with the
// rank that runs it, inside the action's measured interval (so a slower rank is measured slower).
TEST_F(Executor, ActionHookRunsInsideEveryMeasuredAction) {
  Config cfg = tiny_config(2);
  cfg.parallel.schedule = Schedule::one_f_one_b;
  const auto cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> lengths{20, 30};
  const auto seqs = random_tokens(lengths, 256, 4);
  const plan::Plan p = plan::make_plan(cfg, cm, lengths);
  MemoryTracker tracker;
  const testing::PlanEngines engines = testing::plan_engines(cfg.model, p, 7, tracker);
  constexpr double kPause = 0.02;
  std::map<int32_t, int> calls;
  const ActionHook hook = [&](int32_t rank, const plan::Action&, ActionSpent spent) {
    ++calls[rank];
    EXPECT_GE(spent.wall_s, 0.0);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::duration<double>(kPause));
  };
  const std::vector<obs::StepStats> stats =
      execute_plan_local(p, engines.by_stage, seqs, 0.01, nullptr, hook);
  ASSERT_EQ(stats.size(), 2u);
  for (int32_t r = 0; r < 2; ++r) {
    EXPECT_EQ(calls[r], static_cast<int>(p.actions[static_cast<size_t>(r)].size())) << r;
  }
  for (const obs::ActionTiming& t : stats[1].timings) EXPECT_GE(t.end_s - t.start_s, kPause);
}

}  // namespace
}  // namespace infinipipe::runtime
