// FlexSP (Wang et al., arXiv 2412.01523): per global batch, the devices are split into
// sequence-parallel groups of different sizes and each sequence is assigned to one group, so
// that the slowest group finishes as early as possible; ZeRO-3 over the whole cluster. FlexSP
// solves this as a MILP; here every split of the devices into power-of-two groups is tried with
// a longest-first greedy assignment, and the result's gap to a lower bound is reported.
// docs/cost-model.md, "flexsp".
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/baseline.h"
#include "sim/baseline_deepspeed.h"

namespace infinipipe::sim {

struct FlexSpResult {
  BaselineResult result;
  std::vector<int64_t> group_sizes;  // largest first
  std::vector<double> group_time_s;  // compute + all-to-alls of each group
  double lower_bound_s = 0;          // no assignment can beat this step time
  int64_t splits_tried = 0;
};

// One split of the devices (sizes summing to the devices), sequences assigned greedily.
// Throws ConfigError when a size cannot be a group or a sequence fits no group's memory.
FlexSpResult simulate_flexsp_groups(const cost::CostModel& cm, const Config& cfg,
                                    std::span<const int64_t> batch,
                                    std::span<const int64_t> group_sizes);

// The best split found; marked oom (with the least-memory split) when none fits.
FlexSpResult simulate_flexsp(const cost::CostModel& cm, const Config& cfg,
                             std::span<const int64_t> batch);

// The group sizes a split may use: powers of two up to the devices and the heads, inside one
// node or whole nodes.
std::vector<int64_t> flexsp_group_sizes(const Config& cfg, const ModelConfig& model);

}  // namespace infinipipe::sim
