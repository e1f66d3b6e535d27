// The driver's iteration, part by part in the order step() runs them: each takes what the one
// before it returned (the batch's share, its plan, the backend's execution, the loss); the cost
// loop and the backend's optimizer follow.
#include "runtime/run_driver.h"

#include <chrono>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "obs/process_rss.h"
#include "plan/plan_explain.h"
#include "runtime/checkpoint_meta.h"
#include "runtime/executor.h"
#include "runtime/seconds_since.h"

namespace infinipipe::runtime {

namespace {

using Clock = std::chrono::steady_clock;

CostLoopRank cost_loop_rank_of(const RunRank& r) {
  return {r.distributed, r.pp, r.dp, r.stage, r.replica};
}

bool same_layout(const std::vector<plan::StageSpec>& a, const std::vector<plan::StageSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first_layer != b[i].first_layer || a[i].num_layers != b[i].num_layers ||
        a[i].has_embedding != b[i].has_embedding || a[i].has_lm_head != b[i].has_lm_head) {
      return false;
    }
  }
  return true;
}

// Planning runs in the background: the trace shows what this step waited for its plan.
void plan_wait_trace(obs::StepStats& stats, Clock::time_point t_plan,
                     const obs::IterationMetrics& m) {
  obs::trace_event_add(stats, "plan",
                       fmt::format("waiting for the plan (planner took {:.3f} s)", m.plan_seconds),
                       t_plan,
                       t_plan + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(m.plan_wait_seconds)));
}

// What the iteration did (the whole batch's sequences and tokens) next to what its plan predicted
// for this rank (`stage`, its pipeline rank).
void step_metrics_fill(const Batch& batch, int64_t predicted, const PlannedBatch& planned,
                       int32_t stage, Clock::time_point t_start, obs::IterationMetrics& m) {
  const plan::Plan& p = planned.plan;
  m.sequences = static_cast<int64_t>(batch.lengths.size());
  for (int64_t n : batch.lengths) m.tokens += n;
  m.predicted_tokens = predicted;
  m.seconds = seconds_since(t_start);
  m.tokens_per_s = m.seconds > 0 ? static_cast<double>(m.tokens) / m.seconds : 0;
  m.schedule = p.schedule;
  m.chunks = static_cast<int32_t>(p.chunks.size());
  for (const auto& list : p.actions) {
    for (const plan::Action& a : list) {
      if (a.kind == plan::ActionKind::forward) m.recompute_layers += a.recompute_layers;
    }
  }
  m.plan_knobs = planned.knobs;
  m.predicted_step_seconds = p.predicted_step_time;
  const size_t my_rank = static_cast<size_t>(stage);
  m.predicted_peak_bytes =
      p.predicted_peak_bytes.size() > my_rank ? p.predicted_peak_bytes[my_rank] : 0;
  m.memory_budget = p.memory_budget;
}

}  // namespace

Config config_with_layout(Config cfg, const std::vector<plan::StageSpec>& layout) {
  cfg.parallel.stage_layers.clear();
  for (const plan::StageSpec& s : layout) cfg.parallel.stage_layers.push_back(s.num_layers);
  return cfg;
}

RunDriver::RunDriver(const RunOptions& opts, RunBackend& backend)
    : opts_(opts),
      backend_(backend),
      rank_(backend.rank()),
      collectives_(backend.collectives()),
      cost_loop_(opts.config, backend.prior(), cost_loop_rank_of(rank_), collectives_.cost),
      cfg_(config_with_layout(opts.config, backend.layout())),
      saved_tokenizer_(checkpoint_tokenizer(cfg_)),
      batches_(cfg_, cost_loop_.prior(), rank_.replica),
      planner_(cfg_, rank_.plans, collectives_.pipeline_share),
      start_(start_load()),
      iteration_(start_.iteration),
      last_(cost_loop_.prior()) {
  batches_.position_set(start_.data);
  if (cfg_.training.train_iters > iteration_) batches_.open();
}

nlohmann::json RunDriver::last_plan_explain() const {
  plan::PlanExplain ex = last_.explain;
  plan::explain_chosen_plan(ex, last_.plan, cfg_, last_.cost);
  return plan::explain_to_json(ex);
}

obs::IterationMetrics RunDriver::step() {
  if (!batches_.opened()) fail("trainer: no dataset is open (train-iters {} reached)", iteration_);
  const auto t_start = Clock::now();
  obs::rss_peak_reset();
  obs::IterationMetrics m;
  m.iteration = iteration_ + 1;
  m.train_iters = cfg_.training.train_iters;

  const Batch batch = batches_.next(m.iteration);
  const int64_t predicted = batch_predicted_tokens(batch.lengths);
  Batch share = batches_.share(batch);
  batches_.tokens_read(share);
  const auto t_plan = Clock::now();
  PlannedBatch planned = step_plan(share.lengths, m);

  // Forward and backward of every chunk of the plan, gradients from zero; the loss is scaled to
  // the global per-token mean.
  RunBackend::Executed e =
      backend_.train(planned.plan, share.sequences, 1.0 / static_cast<double>(predicted),
                     m.iteration);
  m.measured_step_seconds = e.seconds;
  cost_loop_.actions_measured(e.stats);
  cost_loop_.tail_add(e.tail_seconds);
  m.loss = step_loss(e, predicted, m.iteration);
  cost_loop_.observe(planned.plan, planned.cost, cfg_, e.stats, m.iteration);
  plan_wait_trace(e.stats.front(), t_plan, m);

  const auto t_optimizer = Clock::now();
  const RunBackend::Update update = backend_.optimizer_step(iteration_);
  m.grad_norm = update.grad_norm;
  m.lr = update.lr;
  obs::trace_event_add(e.stats.front(), "optimizer", "clip and optimizer step", t_optimizer,
                       Clock::now());
  cost_loop_.tail_add(seconds_since(t_optimizer));
  cost_loop_.step_end();
  ++iteration_;
  if (backend_.iteration_end(m, planned.plan, cost_loop_)) planner_.ahead_discard();

  m.consumed_samples = batches_.consumed_samples();
  step_metrics_fill(batch, predicted, planned, rank_.stage, t_start, m);
  backend_.memory_measured(m);
  m.rss_peak_bytes = obs::rss_peak_bytes();
  last_ = std::move(planned);
  last_stats_ = std::move(e.stats);
  return m;
}

// Planning never stalls training: this batch was planned while the last one trained (but for
// the first), and the next one is planned while this one trains. plan_seconds is the planner's
// time, plan_wait_seconds what this step waited for its plan.
PlannedBatch RunDriver::step_plan(std::span<const int64_t> lengths, obs::IterationMetrics& m) {
  const auto t_plan = Clock::now();
  PlannedBatch planned = planner_.plan(lengths, cost_loop_, m.iteration);
  m.plan_seconds = planned.planner_seconds;
  m.plan_wait_seconds = seconds_since(t_plan);
  if (planner_.plans_here() && m.iteration < cfg_.training.train_iters) {
    // A batch that predicts nothing is not planned: step() reports it.
    const Batch next = batches_.peek();
    if (batch_predicted_tokens(next.lengths) > 0)
      planner_.ahead_start(batches_.share(next).lengths, cost_loop_.next_plan_cost_model());
  }
  if (!same_layout(planned.plan.stages, backend_.layout())) {
    fail(
        "iteration {}: the {} plan splits the layers differently from the model's stage layout; "
        "this is a bug in the planner",
        m.iteration, planned.plan.schedule);
  }
  return planned;
}

// The global per-token loss of the executed batch; Error if the plan's chunks missed tokens or
// training diverged.
double RunDriver::step_loss(const RunBackend::Executed& e, int64_t predicted,
                            int64_t iteration) const {
  if (e.loss_tokens != predicted) {
    fail(
        "iteration {}: the plan's chunks covered {} predicted tokens, the batch has {}; the plan "
        "is broken",
        iteration, e.loss_tokens, predicted);
  }
  const double loss = e.loss_sum / static_cast<double>(predicted);
  if (!std::isfinite(loss)) {
    fail(
        "iteration {}: the loss is {}; training diverged. Lower --lr, raise --lr-warmup-iters, "
        "or resume from an earlier checkpoint",
        iteration, loss);
  }
  return loss;
}

}  // namespace infinipipe::runtime
