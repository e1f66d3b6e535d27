// The plans of a training rank's replica: each batch's share is planned on the pipeline's first
// rank (the next batch's on a background thread while this one trains) and broadcast to the
// pipeline's other ranks with the time terms it was planned with, so the ranks of a pipeline run
// the very same plan and hold the same cost model whatever the planner's search and the refit do.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <future>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "cost/online_fit.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "runtime/cost_loop.h"

namespace infinipipe::runtime {

// A replica's plan as every rank of its pipeline holds it.
struct PlannedBatch {
  explicit PlannedBatch(cost::CostModel cm) : cost(std::move(cm)) {}
  plan::Plan plan;
  plan::PlanExplain explain;   // the planner's search, on the rank that planned it
  std::string knobs;           // the plan's knobs, described
  double planner_seconds = 0;  // the planner's own time for it
  cost::CostModel cost;        // what the plan runs with (CostLoop::plan_cost_model)
};

// The pipeline's first rank's `text` on every rank of the pipeline; `what` names the plan in
// deadline messages ("for iteration 7").
using PipelineShare = std::function<std::string(std::string text, const std::string& what)>;

class TrainPlanner {
 public:
  // `cfg`: the run's, its stage layout set. `plans_here`: this rank plans its pipeline's batches
  // and `share` sends them to the pipeline's other ranks (unset: one process plans and runs the
  // whole batch).
  TrainPlanner(const Config& cfg, bool plans_here, PipelineShare share);
  ~TrainPlanner();
  TrainPlanner(const TrainPlanner&) = delete;
  TrainPlanner& operator=(const TrainPlanner&) = delete;

  // This rank makes its pipeline's plans (its first rank).
  bool plans_here() const { return plans_here_; }
  // The plan of this replica's `lengths` for iteration `iteration`, on every rank of the
  // pipeline: the background planner's when it planned these very lengths (it planned the batch
  // the sampler was going to give), else planned now with costs.plan_now_cost_model().
  PlannedBatch plan(std::span<const int64_t> lengths, CostLoop& costs, int64_t iteration);
  // Starts planning `lengths` with `cm` on a thread, which never calls MPI (the planning rank).
  void ahead_start(std::vector<int64_t> lengths, const cost::CostModel& cm);
  // Drops the plan made ahead (the links changed since it was started): the next batch is planned
  // when it comes, with the cost model of then.
  void ahead_discard();
  // A forward-only plan of `lengths` for evaluation, planned with `cm` (the last training plan's,
  // the same on every rank of the pipeline) once the background planner is done, broadcast like
  // a training plan; `iteration` names the broadcast.
  plan::Plan eval_plan(std::span<const int64_t> lengths, const cost::CostModel& cm,
                       int64_t iteration);

 private:
  // A plan of `lengths`, the planner's seconds for it and the time terms it planned with.
  struct Made {
    plan::PlanResult result;
    double seconds = 0;
    std::array<double, cost::kNumOnlineTerms> terms{};
  };
  Made plan_now(std::span<const int64_t> lengths, const cost::CostModel& cm) const;
  Config cfg_;
  bool plans_here_ = true;
  PipelineShare share_;
  // The next batch's plan, made on a background thread while this one trains: its replica's
  // lengths, and the plan to come.
  std::vector<int64_t> ahead_lengths_;
  std::future<Made> ahead_;
};

}  // namespace infinipipe::runtime
