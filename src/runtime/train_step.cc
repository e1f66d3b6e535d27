// One training iteration of the Trainer, part by part, in the order step() runs them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_comm.h"
#include "core/error.h"
#include "obs/process_rss.h"
#include "obs/trace.h"
#include "runtime/dist_step.h"
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

}  // namespace

double Trainer::seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

obs::IterationMetrics Trainer::step() {
  if (!stream_) fail("trainer: no dataset is open (train-iters {} reached)", iteration_);
  const auto t_start = Clock::now();
  obs::rss_peak_reset();
  obs::IterationMetrics m;
  m.iteration = iteration_ + 1;
  m.train_iters = cfg_.training.train_iters;

  const Batch batch = batch_next(m.iteration);
  const int64_t predicted = batch_predicted_tokens(batch.lengths);
  Batch share = replica_share(batch);
  batch_tokens_read(share);
  const Clock::time_point t_plan = step_plan(share.lengths, m);
  step_execute(share, predicted, m);
  step_loss_reduce(predicted, m);
  cost_model_update(m.iteration);
  step_plan_wait_trace(t_plan, m);
  step_optimize(m);
  ++iteration_;
  step_metrics_fill(batch, predicted, t_start, m);
  m.rss_peak_bytes = obs::rss_peak_bytes();
  return m;
}

// Planning never stalls training: this batch was planned while the last one trained (but for
// the first), and the next one is planned while this one trains. plan_seconds is the planner's
// time, plan_wait_seconds what this step waited for its plan. Returns when the wait began.
Trainer::Clock::time_point Trainer::step_plan(std::span<const int64_t> lengths,
                                              obs::IterationMetrics& m) {
  const auto t_plan = Clock::now();
  plan::PlanResult planned = plan_replica(lengths, m.plan_seconds);
  last_plan_ = std::move(planned.plan);
  last_explain_ = std::move(planned.explain);
  m.plan_wait_seconds = seconds_since(t_plan);
  if ((!groups_ || groups_->layout().stage == 0) && m.iteration < cfg_.training.train_iters) {
    plan_ahead_start();
  }
  if (!same_layout(last_plan_.stages, layout_)) {
    fail(
        "iteration {}: the {} plan splits the layers differently from the model's stage layout; "
        "this is a bug in the planner",
        m.iteration, last_plan_.schedule);
  }
  return t_plan;
}

// Forward and backward of every chunk of the plan, gradients accumulated from zero; the loss is
// scaled to the global per-token mean.
void Trainer::step_execute(const Batch& share, int64_t predicted, obs::IterationMetrics& m) {
  for (auto& e : engines_) e->params().grads_zero();
  tracker_.reset_peak();
  const auto t_exec = Clock::now();
  const double loss_scale = 1.0 / static_cast<double>(predicted);
  if (groups_) {
    last_stats_ = {dist_execute_plan(last_plan_, engine_ptrs_, *p2p_, cfg_.model.hidden_size,
                                     tracker_, share.sequences, loss_scale, watchdog_, m.iteration,
                                     grads_.get(), action_hook_)};
  } else {
    last_stats_ = execute_plan_local(last_plan_, engine_ptrs_, share.sequences, loss_scale,
                                     &tracker_, action_hook_);
  }
  m.measured_step_seconds = seconds_since(t_exec);
  step_costs_measure_actions();
}

// The loss over the whole batch (distributed: last stages hold the losses, every rank learns the
// global per-token mean) and the data-parallel gradient all-reduce; Error if the plan's chunks
// missed tokens or training diverged.
std::pair<double, int64_t> Trainer::world_loss(const std::vector<obs::StepStats>& stats,
                                               const std::string& what) const {
  double loss_sum = 0;
  int64_t tokens = 0;
  for (const obs::StepStats& s : stats) {
    loss_sum += s.loss_sum;
    tokens += s.predicted_tokens;
  }
  if (groups_) {
    const double t = p2p_->timeout_s();
    loss_sum = allreduce_sum(groups_->comm().world(), loss_sum, t, "the loss sum" + what);
    tokens = allreduce_sum(groups_->comm().world(), tokens, t, "the token count" + what);
  }
  return {loss_sum, tokens};
}

void Trainer::step_loss_reduce(int64_t predicted, obs::IterationMetrics& m) {
  const std::string it = fmt::format(" of iteration {}", m.iteration);
  const auto [loss_sum, loss_tokens] = world_loss(last_stats_, it);
  if (groups_ && grads_) {
    if (watchdog_) watchdog_->arm("the gradient all-reduce" + it);
    const auto t_finish = Clock::now();
    grads_->finish("the data-parallel gradient all-reduce" + it, last_stats_[0].events);
    step_costs_add_tail(t_finish);  // the all-reduce the backwards did not hide
    if (watchdog_) watchdog_->disarm();
  }
  if (loss_tokens != predicted) {
    fail(
        "iteration {}: the plan's chunks covered {} predicted tokens, the batch has {}; the plan "
        "is broken",
        m.iteration, loss_tokens, predicted);
  }
  m.loss = loss_sum / static_cast<double>(predicted);
  if (!std::isfinite(m.loss)) {
    fail(
        "iteration {}: the loss is {}; training diverged. Lower --lr, raise --lr-warmup-iters, "
        "or resume from an earlier checkpoint",
        m.iteration, m.loss);
  }
}

// Planning runs in the background: the trace shows what this step waited for its plan.
void Trainer::step_plan_wait_trace(Clock::time_point t_plan, const obs::IterationMetrics& m) {
  obs::trace_event_add(last_stats_.front(), "plan",
                       fmt::format("waiting for the plan (planner took {:.3f} s)", m.plan_seconds),
                       t_plan,
                       t_plan + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(m.plan_wait_seconds)));
}

// The tied embedding's gradients joined, the global norm clipped, the optimizer stepped with
// the scheduled lr.
void Trainer::step_optimize(obs::IterationMetrics& m) {
  const auto t_optimizer = Clock::now();
  tied_grads_sum();
  m.grad_norm = grad_norm_clip();
  m.lr = lr_.lr_at(iteration_ * cfg_.training.global_batch_size);
  optimizer_step(m.lr);
  tied_values_copy();
  obs::trace_event_add(last_stats_.front(), "optimizer", "clip and optimizer step", t_optimizer,
                       Clock::now());
  step_costs_add_tail(t_optimizer);
  step_costs_update();
}

// What the iteration did (the whole batch's sequences and tokens) next to what its plan predicted
// for this rank.
void Trainer::step_metrics_fill(const Batch& batch, int64_t predicted, Clock::time_point t_start,
                                obs::IterationMetrics& m) const {
  m.consumed_samples = stream_->consumed_samples();
  m.sequences = static_cast<int64_t>(batch.lengths.size());
  for (int64_t n : batch.lengths) m.tokens += n;
  m.predicted_tokens = predicted;
  m.seconds = seconds_since(t_start);
  m.tokens_per_s = m.seconds > 0 ? static_cast<double>(m.tokens) / m.seconds : 0;
  m.schedule = last_plan_.schedule;
  m.chunks = static_cast<int32_t>(last_plan_.chunks.size());
  for (const auto& list : last_plan_.actions) {
    for (const plan::Action& a : list) {
      if (a.kind == plan::ActionKind::forward) m.recompute_layers += a.recompute_layers;
    }
  }
  m.plan_knobs = knobs_text_;
  m.predicted_step_seconds = last_plan_.predicted_step_time;
  const size_t my_rank = groups_ ? static_cast<size_t>(groups_->layout().stage) : 0;
  m.predicted_peak_bytes = last_plan_.predicted_peak_bytes.size() > my_rank
                               ? last_plan_.predicted_peak_bytes[my_rank]
                               : 0;
  m.measured_peak_bytes = tracker_.peak_total();
  m.measured_activation_peak_bytes = tracker_.peak(MemCategory::mem_activations);
  m.memory_budget = last_plan_.memory_budget;
}

// With tied embeddings and several stages, the last stage holds its own copy of the embedding:
// its gradient joins the first stage's before the update. In one process the update is then
// copied; across ranks both ends sum the two gradients (after the dp all-reduce, so each holds
// the global gradient) and apply the identical update, which keeps the copies bit-identical.
void Trainer::tied_grads_sum() {
  if (tied_grads_) {
    if (watchdog_) watchdog_->arm("the tied embedding's gradient all-reduce");
    tied_grads_->finish("the tied embedding's gradient all-reduce (first and last stage)");
    if (watchdog_) watchdog_->disarm();
    return;
  }
  if (!cfg_.model.tie_embeddings || engines_.size() < 2) return;
  Param* primary = engines_.front()->params().embedding();
  Param* copy = engines_.back()->params().lm_head();
  if (primary == nullptr || copy == nullptr || primary == copy) return;
  for (int64_t i = 0; i < primary->grad.numel(); ++i)
    primary->grad.data()[i] += copy->grad.data()[i];
}

void Trainer::tied_values_copy() {
  if (tied_grads_ || !cfg_.model.tie_embeddings || engines_.size() < 2) return;
  Param* primary = engines_.front()->params().embedding();
  Param* copy = engines_.back()->params().lm_head();
  if (primary == nullptr || copy == nullptr || primary == copy) return;
  std::copy(primary->value.data(), primary->value.data() + primary->value.numel(),
            copy->value.data());
}

// Clips to --clip-grad by the global norm: squares summed over this rank's parameters, then over
// the pipeline (dp replicas hold the same reduced gradients); a tied copy counts once, on the
// first stage. Returns the norm before clipping.
double Trainer::grad_norm_clip() {
  std::vector<OptimTensor> tensors = optim_tensors();
  if (!groups_) return grad_clip_norm(tensors, cfg_.training.clip_grad);
  std::vector<OptimTensor> counted = tensors;
  if (Param* copy = tied_remote_copy()) {
    std::erase_if(counted,
                  [copy](const OptimTensor& t) { return t.value.data() == copy->value.data(); });
  }
  double sq = grad_sum_squares(counted);
  sq = allreduce_sum(groups_->pp_comm(), sq, p2p_->timeout_s(), "the squared gradient norm");
  const double norm = std::sqrt(sq);
  grad_apply_scale(tensors, grad_clip_scale(norm, cfg_.training.clip_grad));
  return norm;
}

// Every parameter, or with the distributed optimizer this replica's share of them, after which
// the replicas exchange the updated weights.
void Trainer::optimizer_step(double lr) {
  const std::vector<OptimTensor> tensors = optim_tensors();
  if (!dist_optimizer_) {
    optimizer_->step(tensors, lr);
    return;
  }
  optimizer_->step(dist_optimizer_->owned(tensors), lr);
  const std::string during = fmt::format("iteration {}", iteration_ + 1);
  if (watchdog_) watchdog_->arm("the distributed optimizer's all-gather of " + during);
  dist_optimizer_->gather_weights(tensors, during);
  if (watchdog_) watchdog_->disarm();
}

}  // namespace infinipipe::runtime
