// Blocking replay of a plan's action lists: every rank runs its list in order; an action waits
// for its cross-stage input (forward: the activation from stage s-1; backward: the gradient from
// stage s+1) plus the transfer time. Gives start/end times of every action, or the deadlock.
// Used by validate() (deadlock), plan_predict() (step time) and the simulator.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::plan {

struct ActionTiming {
  double start = 0, end = 0;
};

struct Replay {
  std::vector<std::vector<ActionTiming>> timing;  // per rank, per action of plan.actions
  double step_time = 0;                           // end of the last action
  bool deadlock = false;
  std::string deadlock_reason;  // names each stuck rank, its action and what it waits for
};

// Seconds to move chunk c's activation (or gradient) across the boundary after stage s:
// transfer[c * num_stages + s]; 0 when both stages share a rank. Empty span = free communication.
std::vector<double> replay_transfer_times(const Plan& plan, const cost::CostModel& cost,
                                          const Config& cfg);
// Node of a pipeline rank: Megatron's rank order puts pp outermost (device = r*dp*ulysses + ...).
int64_t pipeline_rank_node(const Config& cfg, int64_t rank);

// `durations` per rank and action (empty = each action's predicted_time).
Replay schedule_replay(const Plan& plan, std::span<const double> transfer,
                       const std::vector<std::vector<double>>& durations = {});

}  // namespace infinipipe::plan
