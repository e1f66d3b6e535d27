// Shared by the planner and the baseline tuners: turns one candidate setting (chunks, schedule,
// recompute choice) into a scheduled, recompute-chosen, predicted plan and says whether it fits.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"
#include "plan/recompute.h"

namespace infinipipe::plan {

struct Candidate {
  Plan plan;
  bool fits = false;
  // Least budget this candidate fits: with the most recompute where the solve is adaptive, else
  // under its static recompute count; and the rank whose peak that is.
  int64_t min_budget = 0;
  int32_t min_budget_rank = 0;
  double recompute_time = 0;
  double recompute_gap = 0;
};

// The least budget among the candidates a search offered, and the rank that binds there.
struct LeastBudget {
  int64_t bytes = std::numeric_limits<int64_t>::max();
  int32_t rank = 0;
  bool known() const { return bytes != std::numeric_limits<int64_t>::max(); }
  void offer(const Candidate& c) {
    if (c.min_budget >= bytes) return;
    bytes = c.min_budget;
    rank = c.min_budget_rank;
  }
};

// How a too-small budget can also be met under cfg's recompute setting ("" when the planner
// already chooses recompute), for the end of the budget error's message.
const char* least_budget_hint(const Config& cfg);

struct CandidateSpec {
  Schedule schedule = Schedule::epp;
  int32_t vpp = 1;
  const std::vector<StageSpec>* stages = nullptr;  // pp*vpp, model order
  std::vector<Chunk> chunks;
  std::vector<int32_t> pipeline_of_chunk;  // empty = all in pipeline 0
  int32_t static_recompute = -1;           // layers per (stage, chunk); -1 = adaptive solve
  bool exact = false;                      // adaptive: exact solve instead of greedy
  // Adaptive, not exact: the greedy solve of this very plan already made (by the pipeline
  // grouping, pipeline_grouping.h), used instead of solving again; null = solve.
  std::shared_ptr<const SolvedRecompute> greedy;
};

// Never throws for a setting that merely does not fit; throws ConfigError when the schedule
// cannot run these chunks at all (the tuners skip such settings).
Candidate planner_evaluate(const Config& cfg, const cost::CostModel& cm,
                           std::span<const int64_t> lengths, CandidateSpec spec);

// Candidates' peak memory falls as static recompute rises: the least r in [0, max_r] that fits,
// found by bisection, or the r = max_r candidate (not fitting) when none does. `on_evaluated`
// sees every r the bisection tried with its candidate, in order.
using RecomputeTried = std::function<void(int32_t r, const Candidate& c)>;
Candidate planner_least_recompute(const Config& cfg, const cost::CostModel& cm,
                                  std::span<const int64_t> lengths, const CandidateSpec& spec,
                                  int32_t max_r, const RecomputeTried& on_evaluated);

}  // namespace infinipipe::plan
