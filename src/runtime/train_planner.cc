#include "runtime/train_planner.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "plan/forward_plan.h"
#include "plan/plan_json.h"
#include "runtime/seconds_since.h"

namespace infinipipe::runtime {

TrainPlanner::TrainPlanner(const Config& cfg, bool plans_here, PipelineShare share)
    : cfg_(cfg), plans_here_(plans_here), share_(std::move(share)) {}

// The background planner finishes before the configuration it reads goes away.
TrainPlanner::~TrainPlanner() {
  if (ahead_.valid()) ahead_.wait();
}

// Plans `lengths` now with `cm`, timing the planner.
TrainPlanner::Made TrainPlanner::plan_now(std::span<const int64_t> lengths,
                                          const cost::CostModel& cm) const {
  const auto t = std::chrono::steady_clock::now();
  Made p;
  p.result = plan::make_plan_detailed(cfg_, cm, lengths, cfg_.parallel.schedule);
  p.seconds = seconds_since(t);
  p.terms = cost::online_terms_get(cm.coefficients());
  return p;
}

// The cost model is copied: the refit changes the next plans' model while the thread plans.
void TrainPlanner::ahead_start(std::vector<int64_t> lengths, const cost::CostModel& cm) {
  ahead_lengths_ = std::move(lengths);
  ahead_ = std::async(std::launch::async,
                      [this, lengths = ahead_lengths_, cm] { return plan_now(lengths, cm); });
}

void TrainPlanner::ahead_discard() {
  if (!ahead_.valid()) return;
  ahead_.wait();
  ahead_ = {};
  ahead_lengths_.clear();
}

PlannedBatch TrainPlanner::plan(std::span<const int64_t> lengths, CostLoop& costs,
                                int64_t iteration) {
  PlannedBatch out(costs.prior());
  std::array<double, cost::kNumOnlineTerms> terms{};
  if (plans_here()) {
    std::optional<Made> made;
    if (ahead_.valid()) {
      made = ahead_.get();  // rethrows the planner's error, which is this batch's
      if (!std::equal(lengths.begin(), lengths.end(), ahead_lengths_.begin(), ahead_lengths_.end()))
        made.reset();
    }
    if (!made) made = plan_now(lengths, costs.plan_now_cost_model());
    out.plan = std::move(made->result.plan);
    out.explain = std::move(made->result.explain);
    out.knobs = made->result.knobs.describe();
    out.planner_seconds = made->seconds;
    terms = made->terms;
  }
  if (share_) {
    std::string text;
    if (plans_here()) {
      const nlohmann::json j = {{"plan", plan::plan_to_json(out.plan)},
                                {"knobs", out.knobs},
                                {"seconds", out.planner_seconds},
                                {"time_terms", terms}};
      text = j.dump();
    }
    text = share_(std::move(text), fmt::format("for iteration {}", iteration));
    if (!plans_here()) {
      const nlohmann::json j = nlohmann::json::parse(text);
      out.plan = plan::plan_from_json(j.at("plan"));
      out.knobs = j.at("knobs").get<std::string>();
      out.planner_seconds = j.at("seconds").get<double>();
      terms = j.at("time_terms").get<std::array<double, cost::kNumOnlineTerms>>();
    }
  }
  out.cost = costs.plan_cost_model(terms, out.plan);
  return out;
}

plan::Plan TrainPlanner::eval_plan(std::span<const int64_t> lengths, const cost::CostModel& cm,
                                   int64_t iteration) {
  plan::Plan p;
  std::string text;
  if (plans_here()) {
    // The background planner may still be planning the next training batch: one planner at a
    // time, and its plan stays for the next step.
    if (ahead_.valid()) ahead_.wait();
    const plan::PlanResult trained =
        plan::make_plan_detailed(cfg_, cm, lengths, cfg_.parallel.schedule);
    p = plan::plan_forward_only(trained.plan, cm, cfg_);
    if (!share_) return p;
    text = plan::plan_to_json(p).dump();
  }
  text = share_(std::move(text), fmt::format("for iteration {}", iteration));
  if (!plans_here()) p = plan::plan_from_json(nlohmann::json::parse(text));
  return p;
}

}  // namespace infinipipe::runtime
