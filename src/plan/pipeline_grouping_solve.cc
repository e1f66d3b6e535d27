// The recompute solve of one candidate pipeline, as Eq. 14's grouping charges it.
#include <limits>
#include <memory>
#include <utility>

#include "plan/model_states.h"
#include "plan/pipeline_grouping.h"
#include "plan/planner.h"
#include "plan/recompute.h"
#include "plan/schedule.h"

namespace infinipipe::plan {

double PipelineRecomputeGreedy::solve(int32_t begin, int32_t end) {
  // The plan planner_evaluate makes of these chunks as one pipeline.
  Plan p;
  p.pp = static_cast<int32_t>(cfg_.parallel.pipeline_parallel);
  p.vpp = vpp_;
  p.seq_lengths.assign(lengths_.begin(), lengths_.end());
  p.chunks.assign(chunks_.begin() + begin, chunks_.begin() + end);
  for (size_t i = 0; i < p.chunks.size(); ++i) p.chunks[i].id = static_cast<int32_t>(i);
  p.pipeline_of_chunk.assign(p.chunks.size(), 0);
  p.stages = stages_;
  p.memory_budget = planner_budget(cfg_, cm_);
  p.actions.assign(p.pp, {});
  schedule_build(p, Schedule::epp);
  // Pipelines drain one after another, so each one's memory is its own: its solve alone is its
  // share of the whole plan's.
  const MemoryContext mem = plan_memory_context(cfg_, p.memory_budget);
  auto solved = std::make_shared<SolvedRecompute>();
  solved->problem = recompute_problem(p, cm_, mem, RecomputeTie::diagonal);
  // Over budget even with every layer recomputed: the greedy repair would raise every group
  // before it knew.
  if (recompute_min_budget(solved->problem) > solved->problem.budget)
    return std::numeric_limits<double>::infinity();
  solved->solution = recompute_solve_greedy(solved->problem);
  if (!solved->solution.feasible) return std::numeric_limits<double>::infinity();
  const double cost = solved->solution.cost;
  if (begin == 0 && end == static_cast<int32_t>(chunks_.size())) whole_ = std::move(solved);
  return cost;
}

}  // namespace infinipipe::plan
