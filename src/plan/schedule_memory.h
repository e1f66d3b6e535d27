// Predicted memory of every rank along its action list: static bytes (weights, grads, optimizer)
// plus the activations of chunks between their forward and backward, K/V kept for later slices,
// dK/dV buffers of sliced sequences and the working set of a running backward.
#pragma once

#include <cstdint>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::plan {

struct MemoryStep {
  int64_t during = 0;  // highest point while the action runs
  int64_t after = 0;   // once it has finished
};

struct MemoryTrace {
  std::vector<int64_t> static_bytes;           // per rank
  std::vector<std::vector<MemoryStep>> steps;  // per rank, per action of plan.actions
  std::vector<int64_t> peak;                   // per rank: max of static and every `during`
};

cost::StageShape stage_shape(const StageSpec& s);
// Pipeline plans shard the optimizer state over the dp × ulysses replicas of a stage (Megatron's
// distributed optimizer over dp × cp) when there is more than one.
bool plan_zero_shard(const Config& cfg);
int64_t plan_static_bytes(const Plan& plan, const cost::CostModel& cost, const Config& cfg,
                          int32_t rank);

// Assumes every action's stage lives on its rank (validate() checks that first).
MemoryTrace schedule_memory_trace(const Plan& plan, const cost::CostModel& cost, const Config& cfg);

}  // namespace infinipipe::plan
