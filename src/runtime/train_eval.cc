// The Trainer's evaluation: the validation (and final test) loss, as Megatron-LM's evaluate()
// computes it, over forward-only EPP plans through the same pipeline as training. Each batch is
// split over the replicas and planned as training would plan it (the same slicing and packing),
// then run without backward; loss sums and predicted tokens are summed over the world, so the
// result is the token-weighted mean over every predicted token of the evaluated batches.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_comm.h"
#include "core/error.h"
#include "plan/forward_plan.h"
#include "plan/plan_json.h"
#include "runtime/dist_step.h"
#include "runtime/train.h"

namespace infinipipe::runtime {

bool Trainer::evaluates(data::DataSplit split) const {
  return cfg_.training.eval_iters > 0 && datasets_ && datasets_->has(split);
}

// Planned on the pipeline's first stage with the cost model the last training plan used (the
// same on every rank of the pipeline), then broadcast like a training plan.
plan::Plan Trainer::eval_plan_replica(std::span<const int64_t> lengths) {
  const bool plans_here = !groups_ || groups_->layout().stage == 0;
  plan::Plan p;
  std::string text;
  if (plans_here) {
    // The background planner may still be planning the next training batch: one planner at a
    // time, and its plan stays for the next step.
    if (ahead_.valid()) ahead_.wait();
    const plan::PlanResult trained =
        plan::make_plan_detailed(cfg_, last_plan_cm_, lengths, cfg_.parallel.schedule);
    p = plan::plan_forward_only(trained.plan, last_plan_cm_, cfg_);
    if (!groups_) return p;
    text = plan::plan_to_json(p).dump();
  }
  text = plan_share(std::move(text));
  if (!plans_here) p = plan::plan_from_json(nlohmann::json::parse(text));
  return p;
}

// One evaluation batch: (loss sum, predicted tokens) of the whole global batch, on every rank.
std::pair<double, int64_t> Trainer::eval_batch(const Batch& batch, int64_t predicted,
                                               data::DataSplit split) {
  Batch share = replica_share(batch);
  batch_tokens_read(share, split);
  last_eval_plan_ = eval_plan_replica(share.lengths);
  const plan::Plan& p = last_eval_plan_;
  std::vector<obs::StepStats> stats;
  if (groups_) {
    stats = {dist_execute_plan(p, engine_ptrs_, *p2p_, cfg_.model.hidden_size, tracker_,
                               share.sequences, 1.0, watchdog_, iteration_, nullptr, action_hook_)};
  } else {
    stats = execute_plan_local(p, engine_ptrs_, share.sequences, 1.0, &tracker_, action_hook_);
  }
  const auto [loss_sum, tokens] =
      world_loss(stats, fmt::format(" of the {} evaluation after iteration {}",
                                    data::data_split_name(split), iteration_));
  if (tokens != predicted) {
    fail("{} evaluation: the plan's chunks covered {} predicted tokens, the batch has {}",
         data::data_split_name(split), tokens, predicted);
  }
  return {loss_sum, tokens};
}

Trainer::EvalResult Trainer::evaluate(data::DataSplit split, int64_t index) {
  if (!evaluates(split)) {
    fail("trainer: no {} data to evaluate on", data::data_split_name(split));
  }
  const auto t0 = Clock::now();
  const TrainingConfig& t = cfg_.training;
  data::DocumentStream stream =
      datasets_->stream(split, t.global_batch_size, static_cast<uint64_t>(t.seed));
  if (split == data::DataSplit::valid) {
    stream.set_consumed_samples(index * t.eval_iters * t.global_batch_size);
  }
  double loss_sum = 0;
  EvalResult r;
  for (int64_t i = 0; i < t.eval_iters; ++i) {
    const Batch batch = batch_lengths_read(stream.next(), split);
    const int64_t predicted = batch_predicted_tokens(batch.lengths);
    if (predicted == 0) continue;  // every document has at most one token: nothing to score
    const auto [sum, tokens] = eval_batch(batch, predicted, split);
    loss_sum += sum;
    r.tokens += tokens;
  }
  if (r.tokens == 0) {
    fail("the {} evaluation predicts no token: its documents have at most one token each",
         data::data_split_name(split));
  }
  r.loss = loss_sum / static_cast<double>(r.tokens);
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace infinipipe::runtime
