// Primal search for the recompute problem (recompute.h), shared by its solvers: a greedy repair
// that raises recompute counts until every point fits and gives back what is not needed, and a
// local search that trades one group's recompute for cheaper ones elsewhere.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/recompute.h"

namespace infinipipe::plan {

struct RecomputeOccurrence {
  int32_t point = 0, item = 0;
  bool transient = false, forward = false;  // as RecomputeTerm
};

// Where each group's items are and where they appear.
struct RecomputeIndex {
  std::vector<std::vector<int32_t>> items_of;            // group -> items
  std::vector<std::vector<RecomputeOccurrence>> occ_of;  // group -> terms of its items
  std::vector<std::vector<double>> time_of;              // group -> cost per level
};

RecomputeIndex recompute_index(const RecomputeProblem& pb);
// The group's cost with x layers recomputed: the slowest recompute of its items.
double recompute_group_time(const RecomputeProblem& pb, const RecomputeIndex& ix, int32_t g,
                            int32_t x);

// From the levels in `x`: raises groups (to whichever level frees the most over-budget bytes per
// second of recompute) until every point fits, then lowers each group as far as the points allow,
// the dearest first. Returns whether every point fits.
bool recompute_repair(const RecomputeProblem& pb, const RecomputeIndex& ix,
                      std::vector<int32_t>& x);

// Local search on a feasible `x`: lowers one group by a level, repairs with the others, and keeps
// the result when it is cheaper; repeats until no such move helps, the cost is at most
// `good_enough` (a known bound's gap goal: further search cannot prove more), or the calling
// thread's CPU time (thread_cpu_seconds) passes cpu_deadline_s.
void recompute_improve(const RecomputeProblem& pb, const RecomputeIndex& ix,
                       std::vector<int32_t>& x, double cpu_deadline_s, double good_enough = 0);

// Whether some point is over budget whatever the choice: each group at the level that leaves
// that point least (no assumption that more recompute never costs memory). O(terms) when no
// point is over budget with every group at its maximum.
bool recompute_never_fits(const RecomputeProblem& pb);

// The calling thread's CPU seconds. The solve's time limit counts the work it did, not the
// wall-clock a loaded machine stretches (Clp's and CBC's limits count their process's CPU time).
double thread_cpu_seconds();

}  // namespace infinipipe::plan
