// The checkpoint solve of one candidate pipeline, as Eq. 14's grouping charges it.
#include <limits>
#include <utility>

#include "plan/model_states.h"
#include "plan/pipeline_grouping.h"
#include "plan/planner.h"
#include "plan/recompute.h"
#include "plan/schedule.h"

namespace infinipipe::plan {

SegmentRecompute pipeline_recompute_greedy(const Config& cfg, const cost::CostModel& cm,
                                           const std::vector<StageSpec>& stages, int32_t vpp,
                                           std::span<const int64_t> lengths,
                                           const std::vector<Chunk>& chunks) {
  return [&cfg, &cm, &stages, vpp, lengths, &chunks](int32_t begin, int32_t end) {
    Plan p;
    p.pp = static_cast<int32_t>(cfg.parallel.pipeline_parallel);
    p.vpp = vpp;
    p.seq_lengths.assign(lengths.begin(), lengths.end());
    p.chunks.assign(chunks.begin() + begin, chunks.begin() + end);
    for (size_t i = 0; i < p.chunks.size(); ++i) p.chunks[i].id = static_cast<int32_t>(i);
    p.pipeline_of_chunk.assign(p.chunks.size(), 0);
    p.stages = stages;
    p.memory_budget = planner_budget(cfg, cm);
    p.actions.assign(p.pp, {});
    schedule_build(p, Schedule::epp);
    // Pipelines drain one after another, so each one's memory is its own: its solve alone is
    // its share of the whole plan's.
    const MemoryContext mem = plan_memory_context(cfg, p.memory_budget);
    const RecomputeProblem pb = recompute_problem(p, cm, mem, RecomputeTie::diagonal);
    const RecomputeSolution sol = recompute_solve_greedy(pb);
    return sol.feasible ? sol.cost : std::numeric_limits<double>::infinity();
  };
}

}  // namespace infinipipe::plan
