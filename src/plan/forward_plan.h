// Evaluation plans: the validation loss of a global batch runs through the same pipeline as
// training, as a forward-only plan. It keeps the chunks (slicing and packing) and the stage layout
// of the batch's training plan, and each rank's forwards in that plan's order, so long sequences
// are still sliced and short ones packed; there is no backward, no recompute and no gradient.
// Memory: a forward-only stage keeps nothing of a chunk after its forward but the K/V of a slice
// whose sequence has later slices, so it holds at most what the training plan held at the same
// point, which the planner validated against the budget.
#pragma once

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::plan {

// The forward-only plan of `training` (a validated training plan of any schedule): forwards in
// the training order, recompute 0, predicted forward times and the step time of their blocking
// replay. predicted_peak_bytes stays empty (the training plan's peaks bound it, see above).
// Throws Error if the result fails validate_structure.
Plan plan_forward_only(const Plan& training, const cost::CostModel& cost, const Config& cfg);

}  // namespace infinipipe::plan
