// What a rank measured while it ran one plan: each action's interval next to its prediction and
// the host events around them. The executor fills these; traces, metrics and the report read them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace infinipipe::obs {

// One action as it ran: the plan's action (with its predicted_time) and the measured interval,
// seconds since the step's start (steady_clock), so the runtime can be compared with the plan.
struct ActionTiming {
  plan::Action action;
  double start_s = 0;
  double end_s = 0;
  // CPU seconds the rank's thread used in the interval (-1 = unknown): below end_s - start_s
  // when the rank waited for a core it shares with other ranks.
  double cpu_s = -1;
  int64_t memory_bytes = -1;  // the link's tracker, bytes in use after the action (-1 = unknown)
  int64_t peak_bytes = -1;    // its peak during the action (receive included; -1 = unknown)
};

// Something other than a plan action that took time on a rank: a point-to-point wait
// ("p2p_wait"), a gradient all-reduce bucket ("allreduce"), the optimizer step ("optimizer"),
// planning ("plan"). Seconds since the step's start, like ActionTiming; traces and reports read
// these next to the actions.
struct EventTiming {
  std::string category;  // p2p_wait | allreduce | optimizer | plan | reduce
  std::string name;      // human: "activation of chunk 7 from rank 1", "bucket 3 (12.0 MiB)"
  double start_s = 0;
  double end_s = 0;
};

// What one rank measured while running its actions of one plan.
struct StepStats {
  double loss_sum = 0;           // Σ token losses (unscaled) of the chunks whose loss ran here
  int64_t predicted_tokens = 0;  // tokens those losses cover
  std::vector<ActionTiming> timings;
  std::vector<EventTiming> events;
  std::chrono::steady_clock::time_point t0{};  // the origin of every start_s / end_s above
};

}  // namespace infinipipe::obs
