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

// K values the EPP search tries: dense where it matters, geometric beyond.
std::vector<int32_t> epp_k_candidates(int32_t k_max) {
  static constexpr int32_t kList[] = {1,  2,  3,  4,  5,  6,  8,   10,  12, 16,
                                      20, 24, 32, 48, 64, 96, 128, 192, 256};
  std::vector<int32_t> out;
  for (int32_t k : kList)
    if (k <= k_max) out.push_back(k);
  return out;
}

// Every allowed cut: one pipeline per run of chunks linked by a cut sequence.
std::vector<int32_t> finest_grouping(const std::vector<Chunk>& chunks) {
  std::vector<int32_t> out(chunks.size(), 0);
  int32_t g = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    bool continues = false;
    for (const Slice& s : chunks[i].slices) continues = continues || s.offset > 0;
    if (i > 0 && !continues) ++g;
    out[i] = g;
  }
  return out;
}

// The least budget a candidate fits: the largest of `peaks`, and the rank that has it.
void candidate_least_budget(Candidate& cand, const std::vector<int64_t>& peaks) {
  const auto binding = std::max_element(peaks.begin(), peaks.end());
  cand.min_budget = *binding;
  cand.min_budget_rank = static_cast<int32_t>(binding - peaks.begin());
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// What the pipeline grouping (Eq. 14) knows of each chunk on the reference stage, as prefix sums
// over the chunk list: step time, activation bytes without and with full recompute, and the
// time of full recompute; plus the largest transient and the run each chunk belongs to.
struct GroupingCosts {
  std::vector<double> f, b;                 // per chunk: forward, backward seconds
  std::vector<double> pf, pmax, pmin, prt;  // prefix sums (n + 1)
  std::vector<int32_t> unit_start;          // first chunk of the run of each chunk
  double transient = 0;
};

GroupingCosts grouping_costs(const std::vector<Chunk>& chunks, const cost::CostModel& cm,
                             const cost::StageShape& stage) {
  const int32_t n = static_cast<int32_t>(chunks.size());
  GroupingCosts gc;
  gc.f.resize(n);
  gc.b.resize(n);
  gc.unit_start.resize(n);
  gc.pf.assign(n + 1, 0);
  gc.pmax.assign(n + 1, 0);
  gc.pmin.assign(n + 1, 0);
  gc.prt.assign(n + 1, 0);
  for (int32_t c = 0; c < n; ++c) {
    const auto sh = chunks[c].shapes();
    gc.f[c] = cm.forward_time(sh, stage);
    gc.b[c] = cm.backward_time(sh, stage);
    const double keep = static_cast<double>(cm.kv_keep_bytes(sh, stage));
    const double act_full = static_cast<double>(cm.activation_bytes(sh, stage, 0)) + keep;
    const double act_min =
        static_cast<double>(cm.activation_bytes(sh, stage, stage.num_layers)) + keep;
    gc.transient =
        std::max({gc.transient,
                  static_cast<double>(cm.backward_transient_bytes(sh, stage, stage.num_layers) +
                                      cm.dkv_buffer_bytes(sh, stage)),
                  static_cast<double>(cm.forward_transient_bytes(sh, stage))});
    bool continues = false;
    for (const Slice& s : chunks[c].slices) continues = continues || s.offset > 0;
    gc.unit_start[c] = c > 0 && continues ? gc.unit_start[c - 1] : c;
    gc.pf[c + 1] = gc.pf[c] + gc.f[c] + gc.b[c];
    gc.pmax[c + 1] = gc.pmax[c] + act_full;
    gc.pmin[c + 1] = gc.pmin[c] + act_min;
    gc.prt[c + 1] = gc.prt[c] + cm.recompute_time(sh, stage.num_layers);
  }
  return gc;
}

// One step of the grouping's shortest path: every segment [cuts[i], cuts[j]) that fits `cap`
// with the least recompute, relaxing best[j] (and from[j]) from best[i].
void grouping_extend(const GroupingCosts& gc, const std::vector<int32_t>& cuts, size_t i,
                     int32_t pp, double cap, std::vector<double>& best, std::vector<size_t>& from) {
  const int32_t a = cuts[i];
  // Windows of chunks c with c + pp <= e no longer change as the segment grows: fold them in
  // once (`done`), recompute only the last pp each step.
  double done_min = 0, done_need = 0;
  int32_t done = a;
  for (size_t j = i + 1; j < cuts.size(); ++j) {
    const int32_t e = cuts[j];
    auto window = [&](int32_t c, double& lean_out, double& need_out) {
      // On the first stage, chunk c's backward waits for pp chunks after it (its run's start
      // included): the in-flight window [max(a, unit_start[c]), c + pp).
      const int32_t lo = std::max(a, gc.unit_start[c]);
      const int32_t hi = std::min(e, c + pp);
      const double full = gc.pmax[hi] - gc.pmax[lo], lean = gc.pmin[hi] - gc.pmin[lo];
      lean_out = std::max(lean_out, lean);
      if (full > cap && full > lean)
        need_out = std::max(need_out, std::min(1.0, (full - cap) / (full - lean)));
    };
    for (; done < e && done + pp <= e; ++done) window(done, done_min, done_need);
    double worst_min = done_min, need = done_need;
    for (int32_t c = done; c < e; ++c) window(c, worst_min, need);
    if (worst_min > cap) break;  // longer segments only hold more
    const double time =
        gc.pf[e] - gc.pf[a] + (pp - 1) * (gc.f[a] + gc.b[e - 1]) + need * (gc.prt[e] - gc.prt[a]);
    if (best[i] + time < best[j]) {
      best[j] = best[i] + time;
      from[j] = i;
    }
  }
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
  return cfg.training.memory_budget > 0 ? cfg.training.memory_budget : cm.device().memory_bytes;
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
  if (adaptive) {
    const MemoryContext mem = plan_memory_context(cfg, p.memory_budget);
    const RecomputeProblem pb = recompute_problem(p, cm, mem, RecomputeTie::diagonal);
    RecomputeSolution sol = spec.exact ? recompute_solve_exact(pb) : recompute_solve_greedy(pb);
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
                                  int32_t max_r, int32_t* evaluated) {
  auto eval = [&](int32_t r) {
    CandidateSpec s = spec;
    s.static_recompute = r;
    if (evaluated) ++*evaluated;
    return planner_evaluate(cfg, cm, lengths, std::move(s));
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

std::vector<int32_t> epp_group_pipelines(const std::vector<Chunk>& chunks, int32_t pp,
                                         const cost::CostModel& cm, const cost::StageShape& stage,
                                         int64_t activation_budget) {
  const int32_t n = static_cast<int32_t>(chunks.size());
  if (n == 0) return {};
  const GroupingCosts gc = grouping_costs(chunks, cm, stage);
  // A cut before chunk c is allowed when c starts a unit and the previous unit has ended there.
  std::vector<int32_t> cuts;  // allowed segment starts, plus n
  for (int32_t c = 0; c < n; ++c)
    if (gc.unit_start[c] == c) cuts.push_back(c);
  cuts.push_back(n);
  const double cap = static_cast<double>(activation_budget) - gc.transient;
  const size_t u = cuts.size();
  std::vector<double> best(u, kInf);
  std::vector<size_t> from(u, 0);
  best[0] = 0;
  for (size_t i = 0; i + 1 < u; ++i)
    if (best[i] != kInf) grouping_extend(gc, cuts, i, pp, cap, best, from);
  if (best[u - 1] == kInf) return {};
  std::vector<size_t> starts;
  for (size_t j = u - 1; j > 0; j = from[j]) starts.push_back(from[j]);
  std::reverse(starts.begin(), starts.end());
  std::vector<int32_t> out(n, 0);
  for (size_t g = 0; g < starts.size(); ++g) {
    const int32_t lo = cuts[starts[g]];
    const int32_t hi = g + 1 < starts.size() ? cuts[starts[g + 1]] : n;
    for (int32_t c = lo; c < hi; ++c) out[c] = static_cast<int32_t>(g);
  }
  return out;
}

namespace {

// EPP's search over K (slices of the longest sequence): each K's chunk list grouped into
// pipelines (Eq. 14), scheduled, recompute chosen, timed; the fastest that fits wins.
struct EppSearch {
  EppSearch(const Config& c, const cost::CostModel& m, std::span<const int64_t> l, int32_t r)
      : cfg(c), cm(m), lengths(l), fixed_r(r) {}

  const Config& cfg;
  const cost::CostModel& cm;
  std::span<const int64_t> lengths;
  int32_t fixed_r;  // static recompute count, -1 = adaptive
  std::vector<StageSpec> stages = stage_layout_planned(cfg, cm, pp(), 1);

  PlanKnobs knobs;
  Candidate best;
  int32_t best_k = 0;
  bool have = false;
  LeastBudget least;
  PlanExplain explain;    // every evaluated setting, in order
  size_t best_index = 0;  // of `best` in explain.candidates

  int32_t pp() const { return static_cast<int32_t>(cfg.parallel.pipeline_parallel); }
  int64_t budget() const { return planner_budget(cfg, cm); }
  MemoryContext memory() const { return plan_memory_context(cfg, budget()); }

  // Weights alone over budget: no slicing helps.
  bool hopeless() const {
    const MemoryContext mem = memory();
    int64_t max_static = 0;
    for (int32_t r = 0; r < pp(); ++r)
      max_static =
          std::max(max_static, stage_static_bytes(cm, stage_shape(stages[r]), mem));
    return max_static >= budget();
  }

  // One candidate chunk list; its predicted step time, infinity when it does not fit.
  // `label` names the slicing, `processed` the processor run that made the chunks (or null).
  double try_chunks(const std::vector<Chunk>& chunks, int32_t k, const std::string& label,
                    const ProcessorResult* processed) {
    const MemoryContext mem = memory();
    const cost::StageShape first = stage_shape(stages[0]);
    const int64_t act_budget = budget() - stage_static_bytes(cm, first, mem);
    auto groups = epp_group_pipelines(chunks, pp(), cm, first, act_budget);
    std::string grouping = "Eq. 14 grouping";
    if (groups.empty()) {
      groups = finest_grouping(chunks);
      grouping = "finest grouping (none fits the Eq. 14 estimate)";
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
      CandidateSpec spec;
      spec.schedule = Schedule::epp;
      spec.stages = &stages;
      spec.chunks = chunks;
      spec.pipeline_of_chunk = groups;
      spec.static_recompute = fixed_r;
      Candidate c = planner_evaluate(cfg, cm, lengths, std::move(spec));
      ++knobs.candidates;
      least.offer(c);
      explain_record(explain, label + ", " + grouping, k, c);
      if (c.fits) {
        const double t = c.plan.predicted_step_time;
        if (!have || t < best.plan.predicted_step_time) {
          best = std::move(c);
          best_k = k;
          have = true;
          best_index = explain.candidates.size() - 1;
          explain.has_limits = processed != nullptr;
          if (processed) {
            explain.limits = processed->limits;
            explain.relaxed = processed->relaxed;
          }
        }
        return t;
      }
      const auto finest = finest_grouping(chunks);
      if (groups == finest) break;
      groups = finest;  // the estimate was optimistic: every sequence run on its own
      grouping = "finest grouping (retry)";
    }
    return std::numeric_limits<double>::infinity();
  }

  void run() {
    const cost::StageShape ref = processor_reference_stage(cm.model(), pp());
    const int32_t k_max = sequence_max_slices(lengths, cfg.parallel.min_tail_slice);
    auto ks = epp_k_candidates(k_max);
    // Hopeless: one candidate (the finest) tells by how much. Else K = 1 is batch-level PP:
    // also try the tight token packing the batch-level schedules use.
    if (hopeless()) {
      ks = {ks.back()};
      explain.notes.push_back(
          fmt::format("the weights alone exceed the budget: only K={} is tried", ks.back()));
    } else {
      int64_t longest = 0;
      for (int64_t l : lengths) longest = std::max(longest, l);
      try_chunks(pack_micro_batches(lengths, longest), 1,
                 fmt::format("K=1, whole sequences packed (<= {} tokens)", longest), nullptr);
    }
    for (int32_t k : ks) {
      ProcessorResult pr = sequence_process(lengths, k, cm, ref, cfg.parallel.min_tail_slice,
                                            cfg.parallel.epp_uniform_slicing);
      if (pr.slices_of_longest != k && k > 1) {
        explain.notes.push_back(
            fmt::format("K={} skipped: the longest sequence splits into {} "
                        "slices, as with a smaller K",
                        k, pr.slices_of_longest));
        continue;
      }
      const double t = try_chunks(pr.chunks, pr.slices_of_longest,
                                  fmt::format("K={}", pr.slices_of_longest), &pr);
      // Finer slicing only adds overhead once it has clearly lost (time is unimodal in K).
      if (have && t > 1.1 * best.plan.predicted_step_time && k >= 2 * best_k + 2) {
        explain.notes.push_back(fmt::format(
            "search stopped after K={}: more than 10% slower than K={} (step time is unimodal "
            "in K, finer slicing only adds overhead)",
            k, best_k));
        break;
      }
    }
  }
};

}  // namespace

PlanResult plan_epp(const Config& cfg, const cost::CostModel& cm,
                    std::span<const int64_t> lengths) {
  const bool adaptive = cfg.parallel.recompute_granularity == RecomputeGranularity::adaptive;
  EppSearch search(cfg, cm, lengths,
                   adaptive ? -1 : megatron_recompute_layers(cfg.parallel, cm.model().num_layers));
  search.run();
  if (!search.have)
    fail_budget(search.least.bytes, search.least.rank,
                "the memory budget {} per rank is too small for this batch with the epp schedule: "
                "the smallest budget that fits is {} ({} bytes, for rank {}); raise "
                "--memory-budget, use more pipeline stages, or lower --seq-length{}",
                format_bytes(search.budget()), format_bytes(search.least.bytes), search.least.bytes,
                search.least.rank, least_budget_hint(cfg));

  Candidate& best = search.best;
  // The winner gets the exact recompute solve.
  if (adaptive) {
    CandidateSpec spec;
    spec.schedule = Schedule::epp;
    spec.stages = &search.stages;
    spec.chunks = best.plan.chunks;
    spec.pipeline_of_chunk = best.plan.pipeline_of_chunk;
    spec.exact = true;
    Candidate c = planner_evaluate(cfg, cm, lengths, std::move(spec));
    explain_search_end(search.explain, search.best_index, c.fits ? &c : nullptr, search.best_k,
                       search.budget());
    if (c.fits) best = std::move(c);
  } else {
    explain_search_end(search.explain, search.best_index, nullptr, search.best_k, search.budget());
  }
  PlanExplain& ex = search.explain;
  ex.recompute_time = adaptive ? best.recompute_time : 0.0;
  PlanKnobs knobs = search.knobs;
  knobs.slices = search.best_k;
  knobs.pipelines = best.plan.num_pipelines();
  knobs.recompute_layers = search.fixed_r;
  knobs.uniform_slicing = cfg.parallel.epp_uniform_slicing;
  knobs.recompute_time = best.recompute_time;
  knobs.recompute_gap = best.recompute_gap;
  return PlanResult{std::move(best.plan), knobs, std::move(ex)};
}

PlanResult make_plan_detailed(const Config& cfg, const cost::CostModel& cm,
                              std::span<const int64_t> seq_lengths, Schedule schedule) {
  if (seq_lengths.empty()) fail("the batch has no sequences: give at least one length");
  std::vector<int64_t> lengths(seq_lengths.begin(), seq_lengths.end());
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] <= 0)
      fail("sequence {} has length {}: every sequence needs at least one token", i, lengths[i]);
    lengths[i] = std::min(lengths[i], cfg.model.seq_length);  // documents are truncated
  }
  PlanResult res;
  switch (schedule) {
    case Schedule::epp:
      res = plan_epp(cfg, cm, lengths);
      break;
    case Schedule::seq1f1b:
      res = tune_seq1f1b(cfg, cm, lengths);
      break;
    default:
      res = tune_batch_level(cfg, cm, lengths, schedule);
      break;
  }
  res.plan.rank_time_terms = plan_rank_time_terms(cm);
  validate_or_throw(res.plan, cm, cfg);
  return res;
}

Plan make_plan(const Config& cfg, const cost::CostModel& cm, std::span<const int64_t> seq_lengths) {
  return make_plan_detailed(cfg, cm, seq_lengths, cfg.parallel.schedule).plan;
}

}  // namespace infinipipe::plan
