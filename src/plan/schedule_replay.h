// Blocking replay of a plan's action lists: every rank runs its list in order; an action waits
// for its cross-stage input (forward: the activation from stage s-1; backward: the gradient from
// stage s+1) plus the transfer time. Gives start/end times of every action, or the deadlock.
// Used by validate() (deadlock), plan_predict() (step time) and the simulator.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/core_sharing.h"
#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::plan {

struct ActionTiming {
  double start = 0, end = 0;
};

struct Replay {
  std::vector<std::vector<ActionTiming>> timing;  // per rank, per action of plan.actions
  double step_time = 0;  // end of the last action, plus its rank's tail (step_costs)
  bool deadlock = false;
  std::string deadlock_reason;  // names each stuck rank, its action and what it waits for
};

// Seconds to move chunk c's activation (or gradient) across the boundary after stage s:
// transfer[c * num_stages + s]; 0 when both stages share a rank. Empty span = free communication.
std::vector<double> replay_transfer_times(const Plan& plan, const cost::CostModel& cost,
                                          const Config& cfg);
// Node of a pipeline rank: Megatron's rank order puts pp outermost (device = r*dp*ulysses + ...).
int64_t pipeline_rank_node(const Config& cfg, int64_t rank);

// A pipeline rank's costs outside its actions (cost::Coefficients::action_gap_s, step_tail_s):
// `action_gap` before every action, once its input is there; `tail` after its last action.
struct RankStepCost {
  double action_gap = 0, tail = 0;
};

// Each rank's step costs of `cost` (all 0 when its coefficients have none).
std::vector<RankStepCost> replay_step_costs(const Plan& plan, const cost::CostModel& cost);

// `durations` per rank and action (empty = each action's predicted_time). `step_costs` per rank
// (empty = none): an action starts its rank's gap after both its rank is free and its input is
// there, and the step ends at the latest rank's last action plus its tail. `hosts` per rank
// (empty = a core for every rank): where a node holds more ranks than cores, `durations` are
// each action's own time (its rank alone on a core) and an action progresses at
// cost::core_share_speeds of the ranks computing at each moment (processor sharing), so its
// wall time is what timing holds; otherwise the replay is exactly the one without hosts.
Replay schedule_replay(const Plan& plan, std::span<const double> transfer,
                       const std::vector<std::vector<double>>& durations = {},
                       std::span<const RankStepCost> step_costs = {},
                       std::span<const cost::RankHost> hosts = {});

// How long a sent message may stay in flight. A message lives (its sender's buffer) until the
// receiving rank reaches the action that takes it and posts the receive; pipelines hold some for
// several actions. hold[r][i] is the first of rank r's actions whose message may still be in
// flight while action i runs: before action i begins, the messages of actions < hold[r][i] must
// have been taken. The plan's memory counts the messages of actions hold..i-1 in action i, and the
// runtime waits for the others, so the count is exact. The bound comes from a replay with unit
// durations (independent of recompute choices): every wait it adds is met in that replay, where
// each action starts after what it waits for, so the waits cannot deadlock. It never asks for
// the previous action's message (hold <= i-1), which keeps sends overlapped with compute.
std::vector<std::vector<int32_t>> send_hold_start(const Plan& plan);

}  // namespace infinipipe::plan
