// How the model's layers are split over the pp*vpp (virtual) stages. By cost: the embedding and
// the LM head + loss weigh in, so stage 0 and the last stage may get fewer layers. Interleaved
// (vpp > 1) follows Megatron-LM: every virtual stage gets num_layers/(pp*vpp) layers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::plan {

// Equal counts; throws ConfigError unless num_layers is divisible by pp*vpp.
std::vector<StageSpec> stage_layout_uniform(int64_t num_layers, int32_t pp, int32_t vpp);
// The layer counts the user forced (one per stage, model order); throws ConfigError on a wrong
// count, a non-positive entry or a sum other than num_layers.
std::vector<StageSpec> stage_layout_forced(std::span<const int64_t> layers_per_stage,
                                           int64_t num_layers, int32_t pp, int32_t vpp);
// vpp == 1: minimises the largest forward+backward time of `reference` (default: one sequence of
// the model's seq_length) over the stages, every stage at least one layer. vpp > 1: uniform.
std::vector<StageSpec> stage_layout_by_cost(const cost::CostModel& cost, int32_t pp, int32_t vpp,
                                            std::span<const cost::SliceShape> reference = {});

// The layout a plan uses: cfg.parallel.stage_layers when set (the trainer's, fixed while the cost
// model is refitted), else stage_layout_by_cost.
std::vector<StageSpec> stage_layout_planned(const Config& cfg, const cost::CostModel& cost,
                                            int32_t pp, int32_t vpp);

}  // namespace infinipipe::plan
