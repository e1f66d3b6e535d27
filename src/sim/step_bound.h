// A lower bound on the simulated step time of ANY plan a pipeline can make for one replica's
// sequences, from the cost model and the memory budget alone, without planning: the layout
// search skips a layout whose bound cannot beat the best layout found (docs/cost-model.md,
// "Layout search"). step_bound.cc derives it term by term.
#pragma once

#include <cstdint>
#include <span>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::sim {

// Seconds; <= the simulator's step_time of every valid plan (within the budget of
// plan::planner_budget(cfg, cm)) of these lengths, each cut to the model's seq_length, under `cm`
// on cfg's pipeline (cfg.parallel.pipeline_parallel ranks, its ZeRO settings), for every schedule,
// slicing, packing, recompute, layer split, virtual stages and pipeline grouping. 0 when
// `lengths` is empty, or when ranks share cores (their replay is outside what the bound covers).
double step_lower_bound(const cost::CostModel& cm, const Config& cfg,
                        std::span<const int64_t> lengths);

}  // namespace infinipipe::sim
