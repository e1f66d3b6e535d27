// FlexSP (Wang et al., arXiv 2412.01523) as its paper (Alg. 1, §4) and released code describe it:
// the global batch is cut into M micro-batches (sequences sorted longest first, consecutive runs
// of balanced token sums), M tried from M_min (the fewest the cluster's memory allows) to
// M_min + 4; in EVERY micro-batch the devices are split afresh into sequence-parallel groups of
// power-of-two sizes and each of its sequences goes to one group. ZeRO-3 over the whole cluster
// gathers each layer's parameters in every micro-batch, so the groups run in lock step: a
// micro-batch lasts as long as its slowest group and the step is the sum over micro-batches.
// FlexSP solves each micro-batch as a MILP; here every split of the devices is tried with a
// longest-first greedy assignment. docs/cost-model.md, "flexsp".
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/baseline.h"
#include "sim/baseline_deepspeed.h"

namespace infinipipe::sim {

struct FlexSpSetting {
  int64_t recompute_layers = 0;     // every micro-batch, every group (§V-A: 36 for 30B, else 0)
  int64_t extra_micro_batches = 4;  // M is tried from M_min to M_min + this (FlexSP Alg. 1)
};

// The paper's FlexSP for this model: zero3_paper_recompute_layers, M_min .. M_min + 4.
FlexSpSetting flexsp_paper_setting(const ModelConfig& model);

// One sequence-parallel group of one micro-batch: its size, its sequences (run as one packed
// chunk) and what they cost it.
struct FlexSpGroup {
  int64_t size = 0;
  std::vector<int64_t> lengths;
  double time_s = 0;     // compute + all-to-alls
  double compute_s = 0;  // of which compute
  double zero3_exposed_s = 0;  // its ZeRO-3 gathers and reduce-scatters not hidden, per unit
  int64_t activation_bytes = 0;
};

struct FlexSpMicroBatch {
  std::vector<FlexSpGroup> groups;  // sizes largest first
  size_t slowest = 0;               // index of the group that sets the micro-batch's time
  // ZeRO-3's collectives span every device, so each unit's gather waits for the slowest group's
  // previous unit: the slowest group's exposed time is the micro-batch's.
  double zero_exposed_s = 0;
  double time_s() const { return groups[slowest].time_s + zero_exposed_s; }
};

// FlexSP's solve per batch (arXiv 2412.01523 §4.1.3: "typically within 5-15 seconds, which can
// be overlapped with the training time of one batch"; §5: solved on CPUs, several batches
// concurrently, beside the training on GPUs). Our search is not its MILP, so its time is not
// FlexSP's: the paper's is shown beside the step.
inline constexpr double kFlexSpSolveMinSeconds = 5, kFlexSpSolveMaxSeconds = 15;

struct FlexSpResult {
  BaselineResult result;
  std::vector<FlexSpMicroBatch> micro_batches;
  int64_t min_micro_batches = 0;  // M_min
  double lower_bound_s = 0;       // no split and assignment can beat this step time
  int64_t splits_tried = 0;       // splits of the devices per micro-batch
};

// Times a given plan (hand-built, or the search's): micro-batches in order, each with its groups
// (size and sequences; the times are filled in). Throws ConfigError when a size cannot be a
// group, the sizes of a micro-batch do not add up to the devices, or the plan's sequences are
// not the batch's. A group over the memory budget marks the result oom.
FlexSpResult flexsp_evaluate(const cost::CostModel& cm, const Config& cfg,
                             std::span<const int64_t> batch,
                             std::vector<std::vector<FlexSpGroup>> plan,
                             const FlexSpSetting& setting);

// The fastest plan found over M and the splits of every micro-batch; marked oom (with the
// reason) when no M in the range fits.
FlexSpResult simulate_flexsp(const cost::CostModel& cm, const Config& cfg,
                             std::span<const int64_t> batch, const FlexSpSetting& setting);

// The group sizes a split may use: powers of two up to the devices and the heads, inside one
// node or whole nodes (aligned neighbouring GPUs).
std::vector<int64_t> flexsp_group_sizes(const Config& cfg, const ModelConfig& model);

// FlexSP's cut of a batch into m micro-batches: sorted longest first, m consecutive runs whose
// largest token sum is as small as it can be (m <= sequences).
std::vector<std::vector<int64_t>> flexsp_micro_batches(std::span<const int64_t> batch, int64_t m);

}  // namespace infinipipe::sim
