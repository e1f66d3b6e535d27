// What one execution of a plan produced, whoever executed it (ASTRA-sim style: the simulator and
// the real runtime sit behind the same small interface and fill the same StepResult, so predicted
// and measured steps compare field by field).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::sim {

struct ActionRecord {
  plan::Action action;
  double start = 0, end = 0;  // seconds from the start of the step
  double recompute_time = 0;  // backward: the part spent recomputing (at its start)
};

struct MemorySample {
  double time = 0;
  int64_t bytes = 0;
};

struct StepResult {
  std::string source;  // "simulator" or "runtime"
  std::string schedule;
  int32_t pp = 1;
  double step_time = 0;
  std::vector<std::vector<ActionRecord>> actions;  // per rank, in execution order
  std::vector<std::vector<MemorySample>> memory;   // per rank, a polyline over time
  // Per rank: gradient all-reduce over the stage's dp × ulysses replicas after its last backward
  // (not overlapped; 0 without replicas). Included in step_time.
  std::vector<double> dp_sync_time;
  // Derived by step_result_finish():
  std::vector<double> busy_time;     // per rank: sum of action durations
  // Per rank, the busy time split as the cost model charges it: Ulysses all-to-alls, ZeRO-3
  // gathers and reduce-scatters left exposed, and the rest (compute, recompute, β1).
  std::vector<double> alltoall_time, zero3_time, compute_time;
  std::vector<double> bubble_ratio;  // per rank: 1 - busy / step_time
  double bubble_ratio_mean = 0;
  std::vector<int64_t> peak_bytes;  // per rank, from `memory`
  int64_t memory_budget = 0;
  bool oom = false;              // some rank's peak above the budget (budget > 0)
  int64_t tokens = 0;            // of this data-parallel replica's batch
  double tokens_per_second = 0;  // of this replica (the global rate is × dp)
  // Megatron-LM's FLOPs formula (causal attention included). MFU counts 3× the forward FLOPs
  // (forward + backward), as Megatron reports it; HFU adds the recomputed forwards.
  double model_flops = 0;
  double hardware_flops = 0;
  double mfu = 0;  // model_flops / (step_time × pp × ulysses × peak FLOP/s)
  double hfu = 0;
};

// Fills the derived fields from `actions`, `memory` and `step_time`.
void step_result_finish(StepResult& r, const plan::Plan& plan, const cost::CostModel& cost,
                        const Config& cfg);

class Executor {
 public:
  virtual ~Executor() = default;
  virtual StepResult execute(const plan::Plan& plan) = 0;
};

}  // namespace infinipipe::sim
