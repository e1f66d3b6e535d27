// Validation of a plan before it runs (invariant 3 of docs/architecture.md): token coverage, slice
// order, forward-before-backward, deadlock-free send/receive pairing, memory within budget. Each
// error names the rank/stage, the action index, the chunk and the reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::plan {

struct ValidationResult {
  std::vector<std::string> errors;  // empty = valid
  std::vector<int64_t> peak_bytes;  // per rank, when the action lists were well formed
  bool ok() const { return errors.empty(); }
  std::string message() const;  // the errors, one per line
};

// Checks everything it can; stops before deadlock and memory checks when the structure is broken.
ValidationResult validate(const Plan& plan, const cost::CostModel& cost, const Config& cfg);
// Everything but memory: layout, tokens, action lists, slice order, deadlock. Never crashes on a
// malformed plan, so callers may run the replay or the memory trace once it passes.
ValidationResult validate_structure(const Plan& plan, const Config& cfg);
// Throws Error("plan is invalid: ...") with the first errors; BudgetError (budget_error.h: the
// least budget and the rank that binds) when memory is all that is wrong.
void validate_or_throw(const Plan& plan, const cost::CostModel& cost, const Config& cfg);

// Fills every action's predicted_time (backward includes recompute), predicted_peak_bytes and
// predicted_step_time (blocking replay with p2p transfer times), and rank_hosts from
// cost.rank_hosts(). Where ranks share cores an action's predicted_time is its wall time in the
// replay that shares them (schedule_replay); else its own time. Throws Error on a deadlock.
void plan_predict(Plan& plan, const cost::CostModel& cost, const Config& cfg);

// Each action's own time (its rank alone on a core), per rank and action of plan.actions: what
// plan_predict's replay runs.
std::vector<std::vector<double>> plan_action_seconds(const Plan& plan, const cost::CostModel& cost,
                                                     const Config& cfg);

}  // namespace infinipipe::plan
