// Predicted (simulator) versus measured (runtime) execution of the same plan: how the cost model
// is validated and where performance bugs show (docs/architecture.md, "the plan is data").
#pragma once

#include <string>
#include <vector>

#include "sim/executor.h"

namespace infinipipe::sim {

struct StepComparison {
  double step_time_ratio = 0;      // measured / predicted
  std::vector<double> busy_ratio;  // per rank
  std::vector<double> peak_ratio;  // per rank (0 when either side has no memory record)
  double forward_ratio = 0;        // Σ measured / Σ predicted forward durations
  double backward_ratio = 0;       // the same for backwards (recompute included)
  double worst_action_ratio = 0;   // the action furthest from 1 (as measured / predicted)
  int32_t worst_rank = -1, worst_index = -1;
  std::string table() const;  // a few aligned lines for logs
};

// Both results must cover the same action lists (same ranks, same actions in the same order);
// throws Error naming the first difference otherwise.
StepComparison step_compare(const StepResult& predicted, const StepResult& measured);

}  // namespace infinipipe::sim
