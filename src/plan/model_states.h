// Model states (weights, gradients, optimizer state) of a pipeline stage and how they are sharded
// over the devices that hold it: ZeRO-1 (the optimizer over the Ulysses group, and over the
// replicas with --use-distributed-optimizer) or ZeRO-3 (everything over ulysses × dp, the
// paper's "tailored FSDP" inside a stage). With ZeRO-3 each layer's weights are all-gathered
// before its forward and again before its backward, its gradients reduce-scattered after its
// backward; what the prefetch cannot hide behind the neighbouring unit's compute is charged to
// the action (docs/cost-model.md, "ZeRO-3 inside a stage").
#pragma once

#include <cstdint>
#include <span>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::plan {

// Memory a rank holds besides activations, and the budget it must fit.
struct MemoryContext {
  int64_t budget = 0;      // bytes per rank
  int64_t dp = 1;          // data-parallel replicas the optimizer is sharded over (with zero_shard)
  bool zero_shard = true;  // ZeRO-1: shard the optimizer over dp × the Ulysses group
  int64_t zero_stage = 1;  // 3: weights, gradients and optimizer over zero3_group devices
  int64_t zero3_group = 1;
};

// What pipeline plans of cfg assume: the optimizer sharded inside the Ulysses group (and over
// the replicas with --use-distributed-optimizer), or ZeRO-3 over ulysses × dp with --zero-stage 3.
MemoryContext plan_memory_context(const Config& cfg, int64_t budget);

// Sharded model states of one stage on one device.
int64_t stage_sharded_bytes(const cost::CostModel& cm, const cost::StageShape& stage,
                            const MemoryContext& mem);
// ZeRO-3's unsharded buffers while a stage runs: three copies of its largest gathered unit (a
// layer, or the embedding / LM-head table) — the unit computing, the next one prefetched, and
// one unit's whole gradient before its reduce-scatter. 0 with ZeRO-1 or a group of one device.
int64_t stage_gather_buffer_bytes(const cost::CostModel& cm, const cost::StageShape& stage,
                                  const MemoryContext& mem);
// Both: what one stage alone holds besides activations.
int64_t stage_static_bytes(const cost::CostModel& cm, const cost::StageShape& stage,
                           const MemoryContext& mem);
// A rank's stages' sharded states, plus the largest gather buffer of them (one stage runs at a
// time, so the buffers are reused).
int64_t rank_static_bytes(const Plan& plan, const cost::CostModel& cm, const MemoryContext& mem,
                          int32_t rank);

// Seconds of one all-gather or reduce-scatter (`op`) of a unit of `bytes` over the ZeRO-3 group
// of pipeline rank `rank`, the group's devices consecutive (pp outermost), as the collective
// table prices it (cost/collective_table.h: the group's NICs when it spans nodes).
double zero3_unit_collective_seconds(const cost::CostModel& cm, const Config& cfg, int32_t rank,
                                     cost::Collective op, double bytes);

// Gather (and reduce-scatter) seconds the prefetch leaves exposed in a forward / a backward of
// `chunk` on `stage` living on `rank`; 0 with ZeRO-1. With units u_0 … u_{n−1} in execution order,
// gather g_i, compute c_i (backward: b_i) and reduce-scatter r_i:
//   forward  = g_0 + Σ_{i≥1} max(0, g_i − c_{i−1})
//   backward = g_0 + Σ_i max(0, g_{i+1} + r_{i−1} − b_i) + r_{n−1}
// (the next gather and the previous reduce-scatter share the link while unit i computes).
// Recompute inside the backward would hide more; it is not counted, so the charge is an upper
// bound and the recompute solve's objective stays the recompute time alone.
double zero3_forward_exposed_seconds(const cost::CostModel& cm, const Config& cfg,
                                     std::span<const cost::SliceShape> chunk,
                                     const cost::StageShape& stage, int32_t rank);
double zero3_backward_exposed_seconds(const cost::CostModel& cm, const Config& cfg,
                                      std::span<const cost::SliceShape> chunk,
                                      const cost::StageShape& stage, int32_t rank);

}  // namespace infinipipe::plan
