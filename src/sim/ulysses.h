// DeepSpeed-Ulysses baseline: no pipeline; sequence parallel over a group of devices (heads split
// by all-to-alls, 4 per layer each way), data parallel across groups, ZeRO-3 over all devices
// (parameters gathered per layer, gradients reduce-scattered). Modelled with the cost model's
// coefficients so it compares honestly with the pipeline schedules.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::sim {

// One setting of the baseline's knobs.
struct UlyssesSetting {
  int64_t sp_degree = 1;           // sequence-parallel group size; dp = devices / sp
  bool full_recompute = false;     // recompute every layer (keep only layer inputs)
  int64_t micro_batch_tokens = 0;  // token capacity of a packed micro-batch (>= longest sequence)
};

struct UlyssesResult {
  UlyssesSetting setting;
  int64_t dp_degree = 1;
  int64_t micro_batch_rounds = 0;  // micro-batches per data-parallel group (gradient accumulation)
  double step_time_s = 0;
  double compute_time_s = 0;   // forward + backward + recompute, all-to-alls excluded
  double alltoall_time_s = 0;  // Ulysses all-to-alls (on the critical path)
  double zero_exposed_s = 0;   // ZeRO-3 gathers / reduce-scatters not hidden behind compute
  double optimizer_time_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;  // model FLOPs (3× forward, no recompute) / (step × devices × peak)
  int64_t peak_memory_bytes = 0;  // per device
  int64_t memory_budget_bytes = 0;
  bool oom = false;
  std::string reason;  // why the setting does not fit, or why no setting is possible
};

// The best feasible setting (fastest step) over sp degrees (divisors of devices_per_node that
// divide the devices, and all devices), recompute on/off and micro-batch capacities. When
// nothing fits, returns the setting with the smallest peak memory, marked oom.
UlyssesResult simulate_ulysses(const cost::CostModel& cm, const Config& cfg,
                               std::span<const int64_t> seq_lengths);

// One given setting. Throws ConfigError when the setting is impossible (sp does not divide the
// devices or the attention heads, capacity below the longest sequence).
UlyssesResult simulate_ulysses_setting(const cost::CostModel& cm, const Config& cfg,
                                       std::span<const int64_t> seq_lengths,
                                       const UlyssesSetting& setting);

}  // namespace infinipipe::sim
