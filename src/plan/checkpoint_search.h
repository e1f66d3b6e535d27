// Primal search for the checkpoint problem (checkpoint.h), shared by its solvers: a greedy repair
// that raises recompute counts until every point fits and gives back what is not needed, and a
// local search that trades one group's recompute for cheaper ones elsewhere.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/checkpoint.h"

namespace infinipipe::plan {

struct CheckpointOccurrence {
  int32_t point = 0, item = 0;
  bool transient = false, forward = false;  // as CheckpointTerm
};

// Where each group's items are and where they appear.
struct CheckpointIndex {
  std::vector<std::vector<int32_t>> items_of;             // group -> items
  std::vector<std::vector<CheckpointOccurrence>> occ_of;  // group -> terms of its items
  std::vector<std::vector<double>> time_of;               // group -> cost per level
};

CheckpointIndex checkpoint_index(const CheckpointProblem& pb);
// The group's cost with x layers recomputed: the slowest recompute of its items.
double checkpoint_group_time(const CheckpointProblem& pb, const CheckpointIndex& ix, int32_t g,
                             int32_t x);

// From the levels in `x`: raises groups (to whichever level frees the most over-budget bytes per
// second of recompute) until every point fits, then lowers each group as far as the points allow,
// the dearest first. Returns whether every point fits.
bool checkpoint_repair(const CheckpointProblem& pb, const CheckpointIndex& ix,
                       std::vector<int32_t>& x);

// Local search on a feasible `x`: lowers one group by a level, repairs with the others, and keeps
// the result when it is cheaper; repeats until no such move helps or the calling thread's CPU
// time (thread_cpu_seconds) passes cpu_deadline_s.
void checkpoint_improve(const CheckpointProblem& pb, const CheckpointIndex& ix,
                        std::vector<int32_t>& x, double cpu_deadline_s);

// The calling thread's CPU seconds. The solve's time limit counts the work it did, not the
// wall-clock a loaded machine stretches (Clp's and CBC's limits count their process's CPU time).
double thread_cpu_seconds();

}  // namespace infinipipe::plan
