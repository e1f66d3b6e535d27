#include "plan/forward_plan.h"

#include "core/error.h"
#include "plan/schedule_memory.h"
#include "plan/schedule_replay.h"
#include "plan/validate.h"

namespace infinipipe::plan {

Plan plan_forward_only(const Plan& training, const cost::CostModel& cost, const Config& cfg) {
  Plan p;
  p.version = training.version;
  p.schedule = training.schedule;
  p.pp = training.pp;
  p.vpp = training.vpp;
  p.seq_lengths = training.seq_lengths;
  p.chunks = training.chunks;
  p.pipeline_of_chunk = training.pipeline_of_chunk;
  p.stages = training.stages;
  p.memory_budget = training.memory_budget;
  p.forward_only = true;
  p.actions.resize(training.actions.size());
  for (size_t r = 0; r < training.actions.size(); ++r) {
    for (const Action& a : training.actions[r]) {
      if (a.kind != ActionKind::forward) continue;
      Action f = a;
      f.recompute_layers = 0;
      f.predicted_time = cost.forward_time(p.chunks[static_cast<size_t>(a.chunk)].shapes(),
                                           stage_shape(p.stages[static_cast<size_t>(a.stage)]));
      p.actions[r].push_back(f);
    }
  }
  const ValidationResult res = validate_structure(p, cfg);
  if (!res.ok()) fail("the forward-only {} plan is invalid:\n{}", p.schedule, res.message());
  // Ranks sharing cores share them in the replay; then each forward's time is its wall time.
  p.rank_hosts = cost.rank_hosts();
  const Replay r = schedule_replay(p, replay_transfer_times(p, cost, cfg), {}, {}, p.rank_hosts);
  p.predicted_step_time = r.step_time;
  if (cost::cores_shared(p.rank_hosts))
    for (size_t k = 0; k < p.actions.size(); ++k)
      for (size_t i = 0; i < p.actions[k].size(); ++i)
        p.actions[k][i].predicted_time = r.timing[k][i].end - r.timing[k][i].start;
  return p;
}

}  // namespace infinipipe::plan
