// Per pipeline rank costs in a plan: the time terms each rank's actions were predicted with travel
// in the plan (Plan::rank_time_terms), so the simulator, the report and every rank of a pipeline
// time a plan with the coefficients it was made with. docs/cost-model.md, "Per-rank costs".
#pragma once

#include <cstddef>

#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::plan {

// Entries per rank in Plan::rank_time_terms (cost::kNumOnlineTerms).
inline constexpr size_t kPlanTimeTerms = 9;

// Entries per rank in Plan::rank_step_terms: cost::Coefficients::action_gap_s, step_tail_s.
inline constexpr size_t kPlanStepTerms = 2;

// The rank coefficients of `cm` as the plan carries them (empty when cm has none).
std::vector<std::vector<double>> plan_rank_time_terms(const cost::CostModel& cm);
// Their step costs (empty when cm has no rank coefficients, or none has a step cost).
std::vector<std::vector<double>> plan_rank_step_terms(const cost::CostModel& cm);
// `base` with the plan's per-rank time and step terms and its hosts (base's links and memory);
// base itself when the plan carries none. Error when the plan's lists do not match its pp or the term count.
cost::CostModel plan_cost_model(const Plan& plan, const cost::CostModel& base);

}  // namespace infinipipe::plan
