// Eq. 14: grouping EPP's chunk list into consecutive 1F1B pipelines (cuts only between
// sequences), shared by the EPP search and its explanation. Two ways to charge a candidate
// pipeline its recompute: Eq. 14's linear estimate (epp_group_pipelines, planner.h), or the
// recompute solve on the pipelines that can change the choice (epp_group_pipelines_solved).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/plan.h"
#include "plan/recompute.h"

namespace infinipipe::plan {

// Every allowed cut: one pipeline per run of chunks linked by a cut sequence.
std::vector<int32_t> finest_grouping(const std::vector<Chunk>& chunks);

// Recompute seconds chunks [begin, end) cost when run as one pipeline; +infinity when no
// recompute choice fits them.
using PipelineRecompute = std::function<double(int32_t begin, int32_t end)>;

// What epp_group_pipelines_solved did: shortest-path rounds, candidate pipelines solved, and
// whether it fell back to Eq. 14's linear grouping (the cap reached, or the solves left no path).
struct GroupingSolveStats {
  int32_t rounds = 0, solves = 0;
  bool fell_back = false;
};

// Candidate pipelines solved per chunk list at most (each is one recompute solve of up to the
// whole list).
inline constexpr int32_t kGroupingMaxSolves = 24;

// Eq. 14 with each pipeline charged `solve`'s recompute where the estimate puts it over the
// budget (within it: none). A lazy shortest path: a pipeline not solved yet costs an estimate
// (over its disjoint over-budget in-flight windows, the recompute each needs, scaled by what the
// solves so far charged over that estimate); the path's unsolved pipelines are solved, results
// cached, and the path searched again until every pipeline on it is solved. Past
// kGroupingMaxSolves solves, or when the solves leave no path: epp_group_pipelines' answer.
// Deterministic (one thread). Empty when no grouping fits the estimate.
std::vector<int32_t> epp_group_pipelines_solved(const std::vector<Chunk>& chunks, int32_t pp,
                                                const cost::CostModel& cm,
                                                const cost::StageShape& stage,
                                                int64_t activation_budget,
                                                const PipelineRecompute& solve,
                                                GroupingSolveStats* stats = nullptr);

// The greedy recompute solve (recompute_solve_greedy) of chunks [begin, end) of `chunks`
// scheduled alone as one EPP pipeline on `stages` (pp * vpp) under cfg's budget, as a
// PipelineRecompute (pipeline_recompute()). Keeps references to its arguments, and the problem and
// solution of the whole list when it solved it and found it fits: the plan of the one-pipeline
// grouping, which planner_evaluate then need not solve again (CandidateSpec::greedy).
class PipelineRecomputeGreedy {
 public:
  PipelineRecomputeGreedy(const Config& cfg, const cost::CostModel& cm,
                          const std::vector<StageSpec>& stages, int32_t vpp,
                          std::span<const int64_t> lengths, const std::vector<Chunk>& chunks)
      : cfg_(cfg), cm_(cm), stages_(stages), vpp_(vpp), lengths_(lengths), chunks_(chunks) {}

  double solve(int32_t begin, int32_t end);
  PipelineRecompute pipeline_recompute() {
    return [this](int32_t begin, int32_t end) { return solve(begin, end); };
  }
  // The whole list's problem and greedy solution; null when not solved or not fitting.
  std::shared_ptr<const SolvedRecompute> whole() const { return whole_; }

 private:
  const Config& cfg_;
  const cost::CostModel& cm_;
  const std::vector<StageSpec>& stages_;
  int32_t vpp_;
  std::span<const int64_t> lengths_;
  const std::vector<Chunk>& chunks_;
  std::shared_ptr<const SolvedRecompute> whole_;
};

}  // namespace infinipipe::plan
