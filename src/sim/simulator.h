// Discrete-event execution of a plan with the cost model: every action takes its predicted time,
// activations and gradients take the p2p transfer time between their ranks (inter-node when the
// ranks sit on different nodes), sends never block the sender. Memory follows the plan's
// predicted trace (plan/schedule_memory.h) placed on the simulated clock.
#pragma once

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"
#include "sim/executor.h"

namespace infinipipe::sim {

struct SimOptions {
  bool ignore_comms = false;  // free communication (closed-form checks, upper bounds)
  // Recompute every action's time with the cost model instead of trusting predicted_time
  // (always done when the plan carries no predictions).
  bool repredict = false;
};

class Simulator : public Executor {
 public:
  Simulator(const cost::CostModel& cost, const Config& cfg, SimOptions opts = {});
  // Throws Error when the plan is malformed or deadlocks (validate_structure); an over-budget
  // plan simulates and is marked oom.
  StepResult execute(const plan::Plan& plan) override;

 private:
  cost::CostModel cost_;
  Config cfg_;
  SimOptions opts_;
};

// Convenience: Simulator(cost, cfg, opts).execute(plan).
StepResult simulate(const plan::Plan& plan, const cost::CostModel& cost, const Config& cfg,
                    SimOptions opts = {});

}  // namespace infinipipe::sim
