#include "plan/planner.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "plan/baselines.h"
#include "plan/budget_error.h"
#include "plan/plan_costs.h"
#include "plan/plan_explain.h"
#include "plan/recompute.h"
#include "plan/schedule.h"
#include "plan/schedule_memory.h"
#include "plan/schedule_table.h"
#include "plan/sequence_processor.h"
#include "plan/stage_layout.h"
#include "plan/validate.h"

namespace infinipipe::plan {

namespace {

int64_t max_of(const std::vector<int64_t>& v) {
  int64_t m = 0;
  for (int64_t x : v) m = std::max(m, x);
  return m;
}

// The least budget a candidate fits: the largest of `peaks`, and the rank that has it.
void candidate_least_budget(Candidate& cand, const std::vector<int64_t>& peaks) {
  const auto binding = std::max_element(peaks.begin(), peaks.end());
  cand.min_budget = *binding;
  cand.min_budget_rank = static_cast<int32_t>(binding - peaks.begin());
}

// Whether the plan fits its budget with no recompute: then the recompute problem, whose points
// are a memory trace's with a term per live activation (actions × in flight), has nothing to
// solve, and two traces (none, and every layer recomputed for the least budget) say all it
// would (Recompute.PeaksAgreeWithTheScheduleMemoryTrace). Leaves every action at 0 layers.
bool plan_fits_without_recompute(Plan& p, const cost::CostModel& cm, const Config& cfg,
                                 Candidate& cand) {
  auto recompute_all = [&](bool every_layer) {
    for (auto& list : p.actions)
      for (Action& a : list)
        a.recompute_layers = every_layer ? static_cast<int32_t>(p.stages[a.stage].num_layers) : 0;
  };
  recompute_all(false);
  if (max_of(schedule_memory_trace(p, cm, cfg).peak) > p.memory_budget) return false;
  recompute_all(true);
  candidate_least_budget(cand, schedule_memory_trace(p, cm, cfg).peak);
  recompute_all(false);
  return true;
}

}  // namespace

std::string PlanKnobs::describe() const {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (micro_batch_size > 0)
    add(fmt::format("mbs={}", micro_batch_size));
  else if (micro_batch_tokens > 0)
    add(fmt::format("mb={}K tok", micro_batch_tokens / 1024));
  if (slices > 0) add(fmt::format("{}={}", micro_batch_tokens > 0 ? "slices" : "K", slices));
  if (vpp > 1) add(fmt::format("vpp={}", vpp));
  if (pipelines > 1) add(fmt::format("{} pipelines", pipelines));
  if (uniform_slicing) add("uniform slicing");
  if (recompute_layers < 0)
    add("adaptive recompute");
  else if (recompute_layers == 0)
    add("no recompute");
  else
    add(fmt::format("recompute {} layers", recompute_layers));
  return s;
}

int64_t planner_budget(const Config& cfg, const cost::CostModel& cm) {
  return cfg.training.memory_budget > 0 ? cfg.training.memory_budget
                                        : cost::usable_memory_bytes(cm.device());
}

Candidate planner_evaluate(const Config& cfg, const cost::CostModel& cm,
                           std::span<const int64_t> lengths, CandidateSpec spec) {
  Candidate cand;
  Plan& p = cand.plan;
  p.pp = static_cast<int32_t>(cfg.parallel.pipeline_parallel);
  p.vpp = spec.vpp;
  p.seq_lengths.assign(lengths.begin(), lengths.end());
  p.chunks = std::move(spec.chunks);
  for (size_t i = 0; i < p.chunks.size(); ++i) p.chunks[i].id = static_cast<int32_t>(i);
  p.pipeline_of_chunk = spec.pipeline_of_chunk.empty() ? std::vector<int32_t>(p.chunks.size(), 0)
                                                       : std::move(spec.pipeline_of_chunk);
  p.stages = *spec.stages;
  p.memory_budget = planner_budget(cfg, cm);
  p.actions.assign(p.pp, {});
  schedule_build(p, spec.schedule);

  const bool adaptive = spec.static_recompute < 0;
  const bool reuse = spec.greedy && !spec.exact;
  if (adaptive && !reuse && plan_fits_without_recompute(p, cm, cfg, cand)) {
    cand.recompute_time = 0;  // what either solve answers when nothing is over budget
    cand.recompute_gap = 0;
  } else if (adaptive) {
    const MemoryContext mem = plan_memory_context(cfg, p.memory_budget);
    const RecomputeProblem built =
        reuse ? RecomputeProblem{} : recompute_problem(p, cm, mem, RecomputeTie::diagonal);
    const RecomputeProblem& pb = reuse ? spec.greedy->problem : built;
    RecomputeSolution sol = reuse        ? spec.greedy->solution
                            : spec.exact ? recompute_solve_exact(pb)
                                         : recompute_solve_greedy(pb);
    if (!sol.feasible) sol.layers = pb.group_max;  // show the leanest plan
    recompute_apply(p, pb, sol.layers);
    cand.recompute_time = sol.cost;
    cand.recompute_gap = sol.cost > 0 ? (sol.cost - sol.lower_bound) / sol.cost : 0.0;
    candidate_least_budget(cand, recompute_peaks(pb, pb.group_max));  // the most recompute
  } else {
    for (auto& list : p.actions)
      for (Action& a : list)
        a.recompute_layers = static_cast<int32_t>(
            std::min<int64_t>(spec.static_recompute, p.stages[a.stage].num_layers));
  }
  plan_predict(p, cm, cfg);
  // A static recompute count is the user's (or the tuner's) choice: the least budget is the
  // peak under it, not what more recompute would reach.
  if (!adaptive) candidate_least_budget(cand, p.predicted_peak_bytes);
  cand.fits = max_of(p.predicted_peak_bytes) <= p.memory_budget;
  return cand;
}

Candidate planner_least_recompute(const Config& cfg, const cost::CostModel& cm,
                                  std::span<const int64_t> lengths, const CandidateSpec& spec,
                                  int32_t max_r, const RecomputeTried& on_evaluated) {
  auto eval = [&](int32_t r) {
    CandidateSpec s = spec;
    s.static_recompute = r;
    Candidate c = planner_evaluate(cfg, cm, lengths, std::move(s));
    on_evaluated(r, c);
    return c;
  };
  Candidate best = eval(0);
  if (best.fits || max_r == 0) return best;
  Candidate top = eval(max_r);
  if (!top.fits) return top;
  int32_t lo = 0, hi = max_r;  // lo does not fit, hi fits
  while (hi - lo > 1) {
    const int32_t mid = (lo + hi) / 2;
    Candidate c = eval(mid);
    if (c.fits) {
      hi = mid;
      top = std::move(c);
    } else {
      lo = mid;
    }
  }
  return top;
}

PlanResult make_plan_detailed(const Config& cfg, const cost::CostModel& cm,
                              std::span<const int64_t> seq_lengths, Schedule schedule,
                              int32_t threads) {
  if (seq_lengths.empty()) fail("the batch has no sequences: give at least one length");
  std::vector<int64_t> lengths(seq_lengths.begin(), seq_lengths.end());
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] <= 0)
      fail("sequence {} has length {}: every sequence needs at least one token", i, lengths[i]);
    lengths[i] = std::min(lengths[i], cfg.model.seq_length);  // documents are truncated
  }
  PlanResult res = schedule_row(schedule).tune(cfg, cm, lengths, threads);
  res.plan.rank_time_terms = plan_rank_time_terms(cm);
  res.plan.rank_step_terms = plan_rank_step_terms(cm);
  validate_or_throw(res.plan, cm, cfg);
  return res;
}

Plan make_plan(const Config& cfg, const cost::CostModel& cm, std::span<const int64_t> seq_lengths) {
  schedule_check_layout(cfg.parallel);
  return make_plan_detailed(cfg, cm, seq_lengths, cfg.parallel.schedule).plan;
}

}  // namespace infinipipe::plan
