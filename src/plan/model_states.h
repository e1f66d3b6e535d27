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

// What a collective of `comm_s` leaves exposed beside compute of `compute_s` on one GPU: both
// run `slowdown` times slower while they overlap (cost/collective_table.h, overlap_slowdown), so
// max(0, comm − compute) + (slowdown − 1)·min(comm, compute).
double overlap_exposed_seconds(double comm_s, double compute_s, double slowdown);

// ZeRO-3 as DeepSpeed and FSDP run it (docs/cost-model.md, "ZeRO-3 as its implementations run
// it"): the gather and reduce-scatter seconds one unit's prefetch leaves exposed in a forward / a
// backward of `chunk` on `stage` living on `rank`; 0 with ZeRO-1. Units u_0 … u_{n−1} in
// execution order, gather g_i, compute c_i (backward: b_i), ov() = overlap_exposed_seconds:
//   forward  = g_0 + Σ_{i≥1} ov(g_i, c_{i−1})
//   backward = g_0 + Σ_i ov(g_{i+1} + R_i, b_i) + R_n + r(what the bucket still holds)
// where R_i is the reduce-scatter issued after unit i−1: its own gradients without a bucket
// (FSDP), or a bucket of `reduce_bucket_params` parameters when unit i−1's would overflow it
// (DeepSpeed's reduce_bucket_size). Gathers and reduce-scatters share one NCCL stream (one
// process group), so the next gather and the issued reduce-scatter add up. Recompute inside the
// backward would hide more; it is not counted, so the charge is an upper bound and the recompute
// solve's objective stays the recompute time alone.
double zero3_forward_exposed_seconds(const cost::CostModel& cm, const Config& cfg,
                                     std::span<const cost::SliceShape> chunk,
                                     const cost::StageShape& stage, int32_t rank);
double zero3_backward_exposed_seconds(const cost::CostModel& cm, const Config& cfg,
                                      std::span<const cost::SliceShape> chunk,
                                      const cost::StageShape& stage, int32_t rank,
                                      double reduce_bucket_params = 0);

}  // namespace infinipipe::plan
