// What the paper's non-pipeline baselines (Megatron-LM TP x CP, DeepSpeed-Ulysses, FlexSP) share:
// one result shape for `simulate --compare`, and the pieces of their step-time and memory models
// (docs/cost-model.md, "The paper's baselines").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::sim {

// The InfiniPipe paper's case-study split of an iteration (§V-C, Fig. 8), on the critical path
// of the step, so the four parts add up to the step time:
// * zero: gathers and scatters of sharded model states not hidden behind compute (ZeRO-3's per
//   layer, ZeRO-1's once per step);
// * a2a: Ulysses all-to-alls;
// * bubble_p2p: idle time (pipeline bubbles, waiting on a slower group) and exposed point-to-point
//   transfers (pipeline sends, context parallelism's K/V ring);
// * others: computation (with recompute), tensor-parallel collectives, the optimizer step.
struct TimeBreakdown {
  double zero = 0, a2a = 0, bubble_p2p = 0, others = 0;
  double total() const { return zero + a2a + bubble_p2p + others; }
};

struct BaselineResult {
  std::string setting;  // the configuration, in words
  double step_time_s = 0;
  double compute_time_s = 0;  // forward + backward + recompute on the critical path
  double comm_exposed_s = 0;  // communication not hidden behind compute
  double optimizer_time_s = 0;
  TimeBreakdown parts;  // of step_time_s
  double tokens_per_s = 0;
  double mfu = 0;  // model FLOPs (3x forward, no recompute) / (step x devices x peak)
  int64_t peak_memory_bytes = 0;  // per device
  int64_t memory_budget_bytes = 0;
  bool oom = false;
  std::string reason;  // why it does not fit
  // A system that solves a plan per batch: the seconds its paper reports for one solve (a range),
  // not in step_time_s where the paper runs it beside training; 0 for a static layout.
  double solve_min_s = 0, solve_max_s = 0;
  std::string solve_source;
};

// The paper's model sizes (§V-A, LLaMA 7B / 13B / 30B); a model takes the settings of the one
// nearest by parameter count (below 10 B: 7B; below 20 B: 13B; else 30B).
enum class PaperModelSize { b7, b13, b30 };
PaperModelSize paper_model_size(const ModelConfig& model);

// Best-fit decreasing: each sequence goes to the fullest micro-batch it still fits in; lengths
// above the capacity get a micro-batch of their own.
std::vector<std::vector<cost::SliceShape>> baseline_pack(std::span<const int64_t> lengths,
                                                         int64_t capacity);

// ZeRO-3 over all devices as DeepSpeed and FSDP run it: each unit (embedding, every layer, LM
// head) gathered before its forward and again before its backward, the next unit prefetched while
// one computes, the gradients reduce-scattered per unit (FSDP, `reduce_bucket_params` 0) or in
// buckets of that many parameters (DeepSpeed), so what is not hidden is charged unit by unit —
// the same model as EPP's --zero-stage 3 (plan::zero3_forward_exposed_seconds), over a group of
// every device. `g` is the cost model of the group the micro-batch runs on (its per-device
// compute).
double zero3_micro_batch_exposed(const cost::CostModel& g, const Config& cfg,
                                 std::span<const cost::SliceShape> chunk,
                                 double reduce_bucket_params = 0);
// The bytes each device holds under ZeRO-3 over `devices`: its 1/n of the model states plus the
// gathered parameters in flight (two layers being prefetched and the embedding / LM head).
int64_t zero3_static_bytes(const cost::CostModel& cm, int64_t devices);

// Adam over `params` parameters on one device: memory-bound, bytes_per_param read and written.
double optimizer_seconds(const cost::CostModel& cm, double params);

// Fills tokens/s, MFU, the budget and the OOM verdict from step time and peak memory.
void baseline_finish(const cost::CostModel& cm, const Config& cfg, std::span<const int64_t> batch,
                     BaselineResult& r);

void baseline_check_batch(std::span<const int64_t> lengths, const char* who);

}  // namespace infinipipe::sim
