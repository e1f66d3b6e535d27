#include "sim/executor.h"

#include <algorithm>

#include "plan/model_states.h"
#include "plan/schedule_memory.h"

namespace infinipipe::sim {

void step_result_finish(StepResult& r, const plan::Plan& plan, const cost::CostModel& cost,
                        const Config& cfg) {
  const size_t ranks = r.actions.size();
  r.schedule = plan.schedule;
  r.pp = plan.pp;
  r.memory_budget = plan.memory_budget;
  r.busy_time.assign(ranks, 0.0);
  r.bubble_ratio.assign(ranks, 0.0);
  r.bubble_ratio_mean = 0;
  r.alltoall_time.assign(ranks, 0.0);
  r.zero3_time.assign(ranks, 0.0);
  r.compute_time.assign(ranks, 0.0);
  for (size_t k = 0; k < ranks; ++k) {
    for (const ActionRecord& a : r.actions[k]) {
      r.busy_time[k] += a.end - a.start;
      const auto sh = plan.chunks[a.action.chunk].shapes();
      const cost::StageShape st = plan::stage_shape(plan.stages[a.action.stage]);
      const bool fwd = a.action.kind == plan::ActionKind::forward;
      const int32_t rank = static_cast<int32_t>(k);
      r.alltoall_time[k] += cost.ulysses_alltoall_time(cost::chunk_tokens(sh)) *
                            static_cast<double>(st.num_layers + (fwd ? 0 : a.action.recompute_layers));
      r.zero3_time[k] += fwd ? plan::zero3_forward_exposed_seconds(cost, cfg, sh, st, rank)
                             : plan::zero3_backward_exposed_seconds(cost, cfg, sh, st, rank);
    }
    r.compute_time[k] = std::max(0.0, r.busy_time[k] - r.alltoall_time[k] - r.zero3_time[k]);
    r.bubble_ratio[k] = r.step_time > 0 ? 1.0 - r.busy_time[k] / r.step_time : 0.0;
    r.bubble_ratio_mean += r.bubble_ratio[k] / static_cast<double>(ranks);
  }
  r.peak_bytes.assign(r.memory.size(), 0);
  r.oom = false;
  for (size_t k = 0; k < r.memory.size(); ++k) {
    for (const MemorySample& s : r.memory[k]) r.peak_bytes[k] = std::max(r.peak_bytes[k], s.bytes);
    if (r.memory_budget > 0 && r.peak_bytes[k] > r.memory_budget) r.oom = true;
  }

  r.tokens = plan.num_tokens();
  r.tokens_per_second = r.step_time > 0 ? static_cast<double>(r.tokens) / r.step_time : 0.0;
  const int64_t layers = cfg.model.num_layers;
  r.model_flops = 0;
  for (const plan::Chunk& c : plan.chunks)
    r.model_flops += 3.0 * cost.flops(c.shapes(), layers, true);
  double recompute = 0;
  for (const auto& list : plan.actions)
    for (const plan::Action& a : list)
      if (a.kind == plan::ActionKind::backward && a.recompute_layers > 0)
        recompute += cost.flops(plan.chunks[a.chunk].shapes(), a.recompute_layers, false);
  r.hardware_flops = r.model_flops + recompute;
  const double peak = cost.device().peak_flops * static_cast<double>(plan.pp) *
                      static_cast<double>(cfg.parallel.ulysses_degree);
  r.mfu = r.step_time > 0 && peak > 0 ? r.model_flops / (r.step_time * peak) : 0.0;
  r.hfu = r.step_time > 0 && peak > 0 ? r.hardware_flops / (r.step_time * peak) : 0.0;
}

}  // namespace infinipipe::sim
