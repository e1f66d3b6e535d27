// Every action each rank ran in one iteration, measured next to predicted: one JSON line per
// iteration of `train --timings FILE`, written by obs (obs/metrics.h):
// {"iteration": 3, "predicted_step_seconds": ..., "actions": [{"rank", "stage", "kind", "chunk",
// "recompute_layers", "predicted_s", "start_s", "end_s"}, ...]}. Every field is required.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/plan.h"

namespace infinipipe::runlog {

struct TimedAction {
  int32_t rank = 0;  // the plan's (pipeline) rank
  int32_t stage = 0;
  plan::ActionKind kind = plan::ActionKind::forward;
  int32_t chunk = 0;
  int32_t recompute_layers = 0;
  double predicted_s = 0;
  double start_s = 0, end_s = 0;  // seconds since the rank's step started
};

struct ActionTimingsRecord {
  int64_t iteration = 0;
  double predicted_step_seconds = 0;
  std::vector<TimedAction> actions;
};

nlohmann::json timings_record_to_json(const ActionTimingsRecord& r);
// Error naming `where` (the file and the line), the field and `fix` on a missing, renamed or
// mistyped field.
ActionTimingsRecord timings_record_from_json(const nlohmann::json& j, const std::string& where,
                                             const std::string& fix);

}  // namespace infinipipe::runlog
