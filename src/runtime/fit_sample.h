// What the online cost fit learns from one measured action (docs/cost-model.md, "Ranks sharing
// cores"): its own time, the time its rank would take with a core of its own.
#pragma once

#include <map>
#include <tuple>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::runtime {

// An action of a plan as the replay that shares cores predicted it: its own time and its wall
// time (plan::Action::predicted_time).
struct ActionShare {
  double own_s = 0, wall_s = 0;
};

// (kind, stage, chunk) -> its ActionShare, for the plan's actions; empty where the plan's ranks
// do not share cores (cost::cores_shared of plan.rank_hosts false). `cost` is the plan's own
// (plan::plan_cost_model).
using PlanShares = std::map<std::tuple<int, int32_t, int32_t>, ActionShare>;
PlanShares plan_shares(const plan::Plan& plan, const cost::CostModel& cost, const Config& cfg);

// The measured interval `wall_s`, scaled by the share of a core the replay gave the action
// (own / predicted wall): the time it would have taken with a core of its own, at the speed the
// machine ran it. The interval itself where the plan does not share cores (`share` null) or the
// replay did not slow the action.
double action_fit_seconds(double wall_s, const ActionShare* share);

}  // namespace infinipipe::runtime
