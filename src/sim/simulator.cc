#include "sim/simulator.h"

#include <algorithm>

#include "core/error.h"
#include "plan/plan_costs.h"
#include "plan/schedule_memory.h"
#include "plan/schedule_replay.h"
#include "plan/validate.h"

namespace infinipipe::sim {
namespace {

// fp32 gradients (Megatron reduces main_grad in fp32) of the rank's stages.
int64_t rank_grad_bytes(const plan::Plan& plan, const ModelConfig& m, int32_t rank) {
  int64_t params = 0;
  for (const plan::StageSpec& s : plan.stages) {
    if (s.rank != rank) continue;
    params += s.num_layers * m.params_per_layer();
    if (s.has_embedding) params += m.params_embedding();
    if (s.has_lm_head)
      params += m.hidden_size + (m.tie_embeddings && s.has_embedding ? 0 : m.params_embedding());
  }
  return 4 * params;
}

// All-reduce time of a rank's gradients over the dp × ulysses devices holding the same stages;
// without measured host links they are consecutive devices (pp outermost): a group that spans
// nodes holds those nodes' NICs.
double dp_sync_seconds(const plan::Plan& plan, const cost::CostModel& cost, const Config& cfg,
                       int32_t rank) {
  const int64_t group = cfg.parallel.data_parallel * cfg.parallel.ulysses_degree;
  // ZeRO-3 reduce-scatters every unit's gradients over this group inside the backward actions.
  if (group <= 1 || cfg.parallel.zero_stage == 3) return 0.0;
  const double bytes = static_cast<double>(rank_grad_bytes(plan, cfg.model, rank));
  if (!cost.host_links().empty())
    return cost::host_allreduce_time(cost.host_links(), cost.coefficients(),
                                     cost::config_rank_grid(cfg), rank, bytes);
  const cost::DeviceGroup devices{rank * group, group, cfg.cluster.devices_per_node};
  return cost.collective_time(cost::Collective::all_reduce, devices, bytes);
}

}  // namespace

Simulator::Simulator(const cost::CostModel& cost, const Config& cfg, SimOptions opts)
    : cost_(cost), cfg_(cfg), opts_(opts) {}

StepResult Simulator::execute(const plan::Plan& input) {
  plan::ValidationResult ok = plan::validate_structure(input, cfg_);
  if (!ok.ok()) fail("cannot simulate the {} plan:\n{}", input.schedule, ok.message());
  const cost::CostModel costs = plan::plan_cost_model(input, cost_);  // the plan's rank costs
  bool predicted = false;
  for (const auto& list : input.actions)
    for (const plan::Action& a : list) predicted = predicted || a.predicted_time > 0;
  plan::Plan repredicted;
  const plan::Plan* p = &input;
  if (opts_.repredict || !predicted) {
    repredicted = input;
    plan::plan_predict(repredicted, costs, cfg_);
    p = &repredicted;
  }
  const plan::Plan& plan = *p;

  std::vector<double> transfer;
  if (!opts_.ignore_comms) transfer = plan::replay_transfer_times(plan, costs, cfg_);
  // The ranks' measured step costs, where the plan carries them (training's online fit).
  const std::vector<plan::RankStepCost> step_costs = plan::replay_step_costs(plan, costs);
  // Where ranks share cores the plan's action times are wall times of its replay; the replay
  // runs each action's own time.
  const std::vector<std::vector<double>> own = cost::cores_shared(plan.rank_hosts)
                                                   ? plan::plan_action_seconds(plan, costs, cfg_)
                                                   : std::vector<std::vector<double>>{};
  plan::Replay replay = plan::schedule_replay(plan, transfer, own, step_costs, plan.rank_hosts);
  if (replay.deadlock)
    fail("cannot simulate the {} plan: {}", plan.schedule, replay.deadlock_reason);
  plan::MemoryTrace mem = plan::schedule_memory_trace(plan, costs, cfg_);

  StepResult r;
  r.source = "simulator";
  r.dp_sync_time.assign(plan.pp, 0.0);
  for (int32_t k = 0; k < plan.pp; ++k) {
    r.dp_sync_time[k] = dp_sync_seconds(plan, costs, cfg_, k);
    double done = replay.timing[k].empty() ? 0.0 : replay.timing[k].back().end;
    // A measured tail holds the exposed data-parallel all-reduce already: it replaces the
    // modelled one, so the step time is the replay's (the plan's predicted_step_time).
    const double tail = step_costs[k].tail > 0 ? step_costs[k].tail : r.dp_sync_time[k];
    r.step_time = std::max(r.step_time, done + tail);
  }
  r.actions.resize(plan.pp);
  r.memory.resize(plan.pp);
  for (int32_t k = 0; k < plan.pp; ++k) {
    const auto& list = plan.actions[k];
    auto& out = r.actions[k];
    auto& curve = r.memory[k];
    out.resize(list.size());
    int64_t level = mem.static_bytes[k];
    curve.push_back({0.0, level});
    for (size_t i = 0; i < list.size(); ++i) {
      const plan::Action& a = list[i];
      const plan::ActionTiming& t = replay.timing[k][i];
      ActionRecord& rec = out[i];
      rec.action = a;
      rec.start = t.start;
      rec.end = t.end;
      if (a.kind == plan::ActionKind::backward && a.recompute_layers > 0)
        rec.recompute_time = std::min(
            t.end - t.start, costs.recompute_time(plan.chunks[a.chunk].shapes(), a.recompute_layers,
                                                  plan.rank_of_stage(a.stage)));
      const plan::MemoryStep& m = mem.steps[k][i];
      curve.push_back({t.start, level});
      if (a.kind == plan::ActionKind::backward) {  // working set up front, freed at the end
        curve.push_back({t.start, m.during});
        curve.push_back({t.end, m.during});
      }
      curve.push_back({t.end, m.after});
      level = m.after;
    }
    curve.push_back({r.step_time, level});
  }
  step_result_finish(r, plan, costs, cfg_);
  return r;
}

StepResult simulate(const plan::Plan& plan, const cost::CostModel& cost, const Config& cfg,
                    SimOptions opts) {
  return Simulator(cost, cfg, opts).execute(plan);
}

}  // namespace infinipipe::sim
