// One training iteration of the Trainer, part by part, in the order step() runs them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "comm/mpi_groups.h"
#include "comm/mpi_p2p.h"
#include "core/error.h"
#include "obs/process_rss.h"
#include "obs/trace.h"
#include "runtime/dist_step.h"
#include "runtime/seconds_since.h"
#include "runtime/train.h"

namespace infinipipe::runtime {

namespace {

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
void plan_wait_trace(obs::StepStats& stats, std::chrono::steady_clock::time_point t_plan,
                     const obs::IterationMetrics& m) {
  obs::trace_event_add(stats, "plan",
                       fmt::format("waiting for the plan (planner took {:.3f} s)", m.plan_seconds),
                       t_plan,
                       t_plan + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(m.plan_wait_seconds)));
}

// What the iteration did (the whole batch's sequences and tokens) next to what its plan predicted
// for this rank (`stage`, its pipeline rank).
void step_metrics_fill(const Batch& batch, int64_t predicted, const PlannedBatch& planned,
                       int32_t stage, MemoryTracker& tracker,
                       std::chrono::steady_clock::time_point t_start, obs::IterationMetrics& m) {
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
  m.measured_peak_bytes = tracker.peak_total();
  m.measured_activation_peak_bytes = tracker.peak(MemCategory::mem_activations);
  m.memory_budget = p.memory_budget;
}

}  // namespace

// Each part takes what the one before it returned: the batch's share, its plan, the stats of
// its execution, the loss; the cost loop and the optimizer follow.
obs::IterationMetrics Trainer::step() {
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

  // Forward and backward of every chunk of the plan, gradients accumulated from zero; the loss
  // is scaled to the global per-token mean.
  stages_.grads_zero();
  stages_.tracker().reset_peak();
  const auto t_exec = Clock::now();
  std::vector<obs::StepStats> stats =
      execute(planned.plan, share, 1.0 / static_cast<double>(predicted), m.iteration,
              optimizer_.dp_reducer());
  m.measured_step_seconds = seconds_since(t_exec);
  cost_loop_.actions_measured(stats);
  m.loss = step_loss(stats, predicted, m.iteration);
  cost_loop_.observe(planned.plan, planned.cost, cfg_, stats, m.iteration);
  plan_wait_trace(stats.front(), t_plan, m);

  const auto t_optimizer = Clock::now();
  const RankOptimizer::Update update = optimizer_.step(iteration_);
  m.grad_norm = update.grad_norm;
  m.lr = update.lr;
  obs::trace_event_add(stats.front(), "optimizer", "clip and optimizer step", t_optimizer,
                       Clock::now());
  cost_loop_.tail_add(seconds_since(t_optimizer));
  cost_loop_.step_end();
  ++iteration_;
  // A step the fit did not expect may be a link that changed: the next plans follow it.
  if (links_.iteration_end(m.iteration, m.measured_step_seconds, planned.plan.predicted_step_time,
                           cost_loop_))
    planner_.ahead_discard();

  m.consumed_samples = batches_.consumed_samples();
  step_metrics_fill(batch, predicted, planned, groups_ ? groups_->layout().stage : 0,
                    stages_.tracker(), t_start, m);
  m.rss_peak_bytes = obs::rss_peak_bytes();
  last_ = std::move(planned);
  last_stats_ = std::move(stats);
  return m;
}

// Planning never stalls training: this batch was planned while the last one trained (but for
// the first), and the next one is planned while this one trains. plan_seconds is the planner's
// time, plan_wait_seconds what this step waited for its plan.
PlannedBatch Trainer::step_plan(std::span<const int64_t> lengths, obs::IterationMetrics& m) {
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
  if (!same_layout(planned.plan.stages, stages_.layout())) {
    fail(
        "iteration {}: the {} plan splits the layers differently from the model's stage layout; "
        "this is a bug in the planner",
        m.iteration, planned.plan.schedule);
  }
  return planned;
}

std::vector<obs::StepStats> Trainer::execute(const plan::Plan& plan, const Batch& share,
                                             double loss_scale, int64_t iteration,
                                             DistGradReducer* grads) {
  if (groups_) {
    return {dist_execute_plan(plan, stages_.engines(), *p2p_, cfg_.model.hidden_size,
                              stages_.tracker(), share.sequences, loss_scale, watchdog_, iteration,
                              grads, action_hook_)};
  }
  return execute_plan_local(plan, stages_.engines(), share.sequences, loss_scale,
                            &stages_.tracker(), action_hook_);
}

// The loss over the whole batch (distributed: last stages hold the losses, every rank learns the
// global per-token mean), then the data-parallel gradient all-reduce.
double Trainer::step_loss(std::vector<obs::StepStats>& stats, int64_t predicted,
                          int64_t iteration) {
  const std::string it = fmt::format(" of iteration {}", iteration);
  const auto [loss_sum, loss_tokens] =
      world_loss(stats, groups_, p2p_ ? p2p_->timeout_s() : 0.0, it);
  if (groups_) cost_loop_.tail_add(optimizer_.dp_finish(it, stats.front().events));
  if (loss_tokens != predicted) {
    fail(
        "iteration {}: the plan's chunks covered {} predicted tokens, the batch has {}; the plan "
        "is broken",
        iteration, loss_tokens, predicted);
  }
  const double loss = loss_sum / static_cast<double>(predicted);
  if (!std::isfinite(loss)) {
    fail(
        "iteration {}: the loss is {}; training diverged. Lower --lr, raise --lr-warmup-iters, "
        "or resume from an earlier checkpoint",
        iteration, loss);
  }
  return loss;
}

}  // namespace infinipipe::runtime
