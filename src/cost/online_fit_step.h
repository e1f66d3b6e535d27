// Online fit of a training rank's per-step costs outside its actions: the executor's bookkeeping
// before each action (beyond waiting for its input) and the tail after its last action (exposed
// data-parallel all-reduce, clip, optimizer step). The plan does not see them, so without them
// the predicted step is short by their sum (docs/benchmarks.md, "Where the iteration's time
// goes"). Each is a forgetting-weighted mean of what the rank measured: the gap per action
// (weighted by the step's actions) and the tail per step. docs/cost-model.md, "Per-rank costs".
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace infinipipe::cost {

// What one rank measured in one iteration.
struct StepCostSample {
  int64_t actions = 0;    // actions the rank ran
  double gap_sum_s = 0;   // Σ over them of (start − max(previous end, input arrival))
  double tail_s = 0;      // after the last action: own work, no waits for other ranks
};

struct StepCostState {
  std::array<double, 2> weighted{}, weight{};  // gap: Σ λ^k·gap_sum, Σ λ^k·actions; tail
};

class StepCostFit {
 public:
  // `forgetting` per iteration, in (0, 1]; ConfigError otherwise. 0.9: about the last ten
  // iterations count, as many as the action fit's 0.99 over a demo rank's actions.
  explicit StepCostFit(double forgetting = 0.9);

  // Error for negative or non-finite values.
  void update(const StepCostSample& s);
  // Seconds before each action / after the last one; 0 before any sample.
  double action_gap() const;
  double tail() const;

  StepCostState state() const { return state_; }
  // Error naming `where` for a negative or non-finite value.
  void restore(const StepCostState& s, const std::string& where);

 private:
  double forgetting_;
  StepCostState state_;
};

}  // namespace infinipipe::cost
