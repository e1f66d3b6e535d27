// Predicted memory of every rank along its action list: static bytes (weights, grads, optimizer)
// plus the activations of chunks between their forward and backward, K/V kept for later slices,
// dK/dV buffers of sliced sequences and the working set of a running forward or backward.
#pragma once

#include <cstdint>
#include <span>
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
// Pipeline plans shard the optimizer state (fp32 master weights, Adam m and v) over the Ulysses
// group of a stage, ZeRO-1 style, as DeepSpeed-Ulysses does (planning only: `train` refuses
// ulysses > 1), and over the data-parallel replicas with --use-distributed-optimizer
// (plan_optimizer_dp = dp then, else 1: each replica keeps a full copy). With --zero-stage 3
// weights and gradients are sharded too (plan/model_states.h).
bool plan_zero_shard(const Config& cfg);
int64_t plan_optimizer_dp(const Config& cfg);
// The rank's model states as plan_memory_context(cfg, plan.memory_budget) shards them.
int64_t plan_static_bytes(const Plan& plan, const cost::CostModel& cost, const Config& cfg,
                          int32_t rank);

// Bytes `a` sends to its neighbour stage: a forward's output (but the last stage's), a backward's
// input gradient (but the first stage's). The buffer lives until the neighbour takes it: the
// actions until then carry it on top (in_flight_bytes).
int64_t action_send_bytes(const Plan& plan, const Action& a, const cost::CostModel& cost,
                          std::span<const cost::SliceShape> chunk);
// Per rank and action: bytes of the messages still in flight while it runs, the sends of the
// rank's actions send_hold_start(plan)[r][i] .. i-1 (schedule_replay.h).
std::vector<std::vector<int64_t>> in_flight_bytes(const Plan& plan, const cost::CostModel& cost);

// Assumes every action's stage lives on its rank (validate() checks that first).
MemoryTrace schedule_memory_trace(const Plan& plan, const cost::CostModel& cost, const Config& cfg);

}  // namespace infinipipe::plan
