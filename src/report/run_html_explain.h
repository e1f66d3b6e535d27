// The report page's "Why these plans" section: for a run traced with `train --trace-explain`,
// each traced plan's explanation (plan_explain.h) as tables: the settings the planner's search
// evaluated with their predictions and verdicts, how the chosen plan cut and packed the
// sequences, and what each recompute saves and costs. One (iteration, replica) is shown, a
// selector (a few lines of inline script) shows another.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "plan/plan_explain.h"

namespace infinipipe::report {

// `explains` by (iteration, replica); `shown_iteration`'s replica 0 is shown first (else the
// last). Without any explanation, a note saying how to record them.
std::string html_explain(const std::map<std::pair<int64_t, int32_t>, plan::PlanExplain>& explains,
                         int64_t shown_iteration);

}  // namespace infinipipe::report
