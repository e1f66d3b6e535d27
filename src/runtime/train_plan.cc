// The Trainer's planning: each replica's share is planned on its first pipeline rank (the next
// batch's in the background while this one trains) and broadcast to the pipeline's other ranks.
#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "comm/mpi_comm.h"
#include "plan/plan_costs.h"
#include "plan/plan_explain.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "runtime/train.h"

namespace infinipipe::runtime {

// Plans `lengths` now with `cm`, timing the planner.
Trainer::Planned Trainer::plan_now(std::span<const int64_t> lengths,
                                   const cost::CostModel& cm) const {
  const auto t = Clock::now();
  Planned p;
  p.result = plan::make_plan_detailed(cfg_, cm, lengths, cfg_.parallel.schedule);
  p.seconds = seconds_since(t);
  p.terms = cost::online_terms_get(cm.coefficients());
  return p;
}

// The plan of `lengths`: the background planner's when it planned these very lengths (it
// planned the batch the sampler was going to give), else planned now.
Trainer::Planned Trainer::plan_take(std::span<const int64_t> lengths) {
  if (ahead_.valid()) {
    Planned p = ahead_.get();  // rethrows the planner's error, which is this batch's
    if (std::equal(lengths.begin(), lengths.end(), ahead_lengths_.begin(), ahead_lengths_.end()))
      return p;
  }
  if (first_plan_cm_) {
    const cost::CostModel cm = std::move(*first_plan_cm_);
    first_plan_cm_.reset();
    return plan_now(lengths, cm);
  }
  return plan_now(lengths, plan_cm_);
}

// Starts planning the next global batch on a thread. The sampler is copied to look ahead, so
// the position a checkpoint saves stays the consumed one; the cost model too, as the refit
// changes plan_cm_ while the thread plans.
void Trainer::plan_ahead_start() {
  data::DocumentStream peek = *stream_;
  std::optional<data::OutlierDelay> peek_delay = delay_;
  const Batch batch = batch_lengths_read(documents_next(peek, peek_delay));
  if (batch_predicted_tokens(batch.lengths) == 0) return;  // step() reports that batch
  ahead_lengths_ = replica_share(batch).lengths;
  ahead_ = std::async(std::launch::async, [this, lengths = ahead_lengths_, cm = plan_cm_] {
    return plan_now(lengths, cm);
  });
}

// From the pipeline's first stage to the others, with the p2p deadline: a stage that stopped
// between iterations is named instead of hanging the broadcast.
void Trainer::plan_broadcast(void* data, int count, MPI_Datatype type, const std::string& what) {
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Ibcast(data, count, type, 0, groups_->pp_comm(), &req),
            "starting the broadcast of " + what);
  mpi_wait_deadline(
      {&req, 1}, {}, p2p_->timeout_s(),
      {fmt::format("the broadcast of {} for iteration {}", what, iteration_ + 1),
       "a stage of this pipeline may have died or hung", comm_peers(groups_->pp_comm())});
}

// The first pipeline stage's `text` (a plan as JSON), on every stage of the pipeline.
std::string Trainer::plan_share(std::string text) {
  int64_t n = static_cast<int64_t>(text.size());
  plan_broadcast(&n, 1, MPI_INT64_T, "the plan's size");
  text.resize(static_cast<size_t>(n));
  plan_broadcast(text.data(), mpi_count(n, "the plan"), MPI_CHAR, "the plan");
  return text;
}

// One process plans the whole batch. Distributed: the replica's share (balance_replicas), planned
// by its first pipeline rank and broadcast with the time terms it was planned with, so the ranks
// of a pipeline run the very same plan and hold the same cost model whatever the planner's search
// and the refit do. planner_seconds: the planner's own time for it.
plan::PlanResult Trainer::plan_replica(std::span<const int64_t> lengths, double& planner_seconds) {
  const bool plans_here = !groups_ || groups_->layout().stage == 0;
  plan::PlanResult out;
  std::array<double, cost::kNumOnlineTerms> terms{};
  if (plans_here) {
    Planned p = plan_take(lengths);
    out = std::move(p.result);
    planner_seconds = p.seconds;
    terms = p.terms;
    knobs_text_ = out.knobs.describe();
  }
  if (!groups_) {
    plan_cost_set(terms, out.plan);
    return out;
  }
  std::string text;
  if (plans_here) {
    nlohmann::json j = {{"plan", plan::plan_to_json(out.plan)},
                        {"knobs", knobs_text_},
                        {"seconds", planner_seconds},
                        {"time_terms", terms}};
    text = j.dump();
  }
  text = plan_share(std::move(text));
  if (!plans_here) {
    const nlohmann::json j = nlohmann::json::parse(text);
    out.plan = plan::plan_from_json(j.at("plan"));
    knobs_text_ = j.at("knobs").get<std::string>();
    planner_seconds = j.at("seconds").get<double>();
    terms = j.at("time_terms").get<std::array<double, cost::kNumOnlineTerms>>();
  }
  plan_cost_set(terms, out.plan);
  return out;
}

nlohmann::json Trainer::last_plan_explain() const {
  plan::PlanExplain ex = last_explain_;
  plan::explain_chosen_plan(ex, last_plan_, cfg_, last_plan_cm_);
  return plan::explain_to_json(ex);
}

void Trainer::plan_cost_set(const std::array<double, cost::kNumOnlineTerms>& terms,
                            const plan::Plan& plan) {
  cost::Coefficients c = cm_.coefficients();
  cost::online_terms_set(terms, c);
  last_plan_cm_ = plan::plan_cost_model(
      plan, cost::CostModel(cm_.model(), cm_.device(), c, cm_.ulysses_degree(), cm_.bf16()));
}

}  // namespace infinipipe::runtime
