// Stage-aware chunk-level adaptive recompute (InfiniPipe §V, Eq. 15–16): how many layers of
// each (stage, chunk) are recomputed so that every rank's memory stays within its budget at every
// point of its action list, at the least recompute time. Variables are tied along the diagonals
// of the backward order (the j-th backward of a pipeline on stage s with its (j+1)-th on stage
// s+1: the backwards that run at the same time; a cut sequence's slices run backward in reverse
// order, so this is not the forward order), so a recompute lengthens a whole wave of concurrent
// backwards instead of rippling bubbles through the pipeline; a tied group costs the slowest of
// its recomputes.
// Also Megatron-LM's static choices for the baselines.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/model_states.h"
#include "plan/plan.h"

namespace infinipipe::plan {

enum class RecomputeTie { none, diagonal };

// One (stage, chunk): its forward and backward carry the same recompute count.
struct RecomputeItem {
  int32_t stage = 0, chunk = 0, rank = 0, group = 0;
  int32_t max_layers = 0;
  std::vector<double> time;        // [r]: recompute seconds with r layers recomputed
  std::vector<int64_t> act;        // [r]: held from forward to backward
  std::vector<int64_t> transient;  // [r]: extra while its backward runs
};

struct RecomputeTerm {
  int32_t item = 0;
  bool transient = false;  // the item's transient bytes, else its held activations
  // Held activations as the item's own forward peaks: a forward builds each layer's whole stash
  // before dropping a recomputed one, so recomputing every layer peaks like all but one.
  bool forward = false;
};

// Bytes of a term of `it` when its group recomputes x layers.
inline int64_t recompute_term_value(const RecomputeItem& it, bool transient, bool forward,
                                    int32_t x) {
  int32_t r = std::min(x, it.max_layers);
  if (transient) return it.transient[static_cast<size_t>(r)];
  if (forward && r > 0 && r == it.max_layers) --r;
  return it.act[static_cast<size_t>(r)];
}

// A moment of a rank's action list: fixed bytes + the listed terms must fit the budget.
struct RecomputePoint {
  int32_t rank = 0, action = 0;
  int64_t fixed = 0;
  std::vector<RecomputeTerm> terms;
};

struct RecomputeProblem {
  int64_t budget = 0;
  int32_t pp = 1;
  std::vector<int32_t> group_max;  // largest useful recompute count per group
  std::vector<RecomputeItem> items;
  std::vector<RecomputePoint> points;
};

struct RecomputeSolution {
  std::vector<int32_t> layers;  // per group
  double cost = 0;              // objective: per group, the slowest recompute of its items
  double lower_bound = 0;       // proven lower bound on the optimum
  bool feasible = false;
  bool proven = false;  // cost within the requested gap of the optimum
};

// A problem with its greedy solution (recompute_solve_greedy), kept to be reused.
struct SolvedRecompute {
  RecomputeProblem problem;
  RecomputeSolution solution;
};

// Builds the problem from a scheduled plan (stages and actions filled).
RecomputeProblem recompute_problem(const Plan& plan, const cost::CostModel& cm,
                                   const MemoryContext& mem, RecomputeTie tie);

// Per-rank peak bytes, and objective, of a choice of recompute counts per group.
std::vector<int64_t> recompute_peaks(const RecomputeProblem& pb, std::span<const int32_t> layers);
double recompute_cost(const RecomputeProblem& pb, std::span<const int32_t> layers);
// Peak with every group at its maximum: the smallest budget recompute can reach (the working
// set of a recomputed layer aside, which never outweighs the layer it frees in the cost model).
int64_t recompute_min_budget(const RecomputeProblem& pb);

// Fast answer (not proven). May miss a feasible choice in contrived cases; the exact solver not.
RecomputeSolution recompute_solve_greedy(const RecomputeProblem& pb);
// Exact within `gap` (relative): the LP relaxation of a thermometer encoding of each group gives
// a lower bound and guides rounding; greedy repair and local search from the greedy answer and
// the rounded ones give the best answer; only when that is not yet within `gap` of the bound
// does CBC add cuts and branch. time_limit_s counts CPU time (the calling thread's; Clp and CBC
// count their process's). On timeout: the best answer found, proven = false.
RecomputeSolution recompute_solve_exact(const RecomputeProblem& pb, double gap = 0.02,
                                        double time_limit_s = 1.0);
// A lower bound on the optimum in O(nonzeros log nonzeros), what the exact solve proves before
// its LP: each point over budget alone as a fractional covering knapsack, points over disjoint
// groups added up. 0 when nothing needs recomputing; +infinity when no choice fits.
double recompute_cover_bound(const RecomputeProblem& pb);
// Enumerates every choice; for tests on tiny problems only.
RecomputeSolution recompute_solve_brute(const RecomputeProblem& pb);

// Writes the per-group choice into the plan's actions (forward and backward of every item).
void recompute_apply(Plan& plan, const RecomputeProblem& pb, std::span<const int32_t> layers);

// Megatron-LM's static recompute count for a stage of `stage_layers` layers: none -> 0;
// full/uniform -> every layer (each keeps only its input); full/block N -> the first N layers;
// selective is treated as none here (attention recompute is not modelled).
int32_t megatron_recompute_layers(const ParallelConfig& par, int64_t stage_layers);
void recompute_apply_static(Plan& plan, const ParallelConfig& par);

}  // namespace infinipipe::plan
