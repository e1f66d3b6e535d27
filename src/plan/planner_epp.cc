// EPP's search: K, larger K = 1 micro-batches, the pipeline grouping and recompute, then the exact
// recompute solve.
#include <algorithm>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "plan/baselines.h"
#include "plan/budget_error.h"
#include "plan/pipeline_grouping.h"
#include "plan/plan_explain.h"
#include "plan/planner.h"
#include "plan/recompute.h"
#include "plan/schedule_memory.h"
#include "plan/sequence_processor.h"
#include "plan/stage_layout.h"

namespace infinipipe::plan {

namespace {

// Threads for the candidate loop: as asked, 0 = every core.
size_t planner_thread_count(int32_t asked) {
  if (asked > 0) return static_cast<size_t>(asked);
  return std::max<size_t>(1, std::thread::hardware_concurrency());
}

// One evaluated grouping of a candidate chunk list, as try_chunks would have recorded it.
struct Attempt {
  Candidate cand;
  std::string grouping;
};

// One candidate of the K search, evaluated without touching the search's state: the K = 1
// packing (no processor run) or one K's processor run, and its groupings tried in order.
struct Evaluated {
  int32_t k = 1;  // asked for
  std::optional<ProcessorResult> processed;
  std::vector<Chunk> packed;  // the K = 1 packing's chunks when there is no processor run
  std::vector<Attempt> attempts;
};

// EPP's search over K (slices of the longest sequence): each K's chunk list grouped into
// pipelines (Eq. 14), scheduled, recompute chosen, timed; the fastest that fits wins.
// Candidates are evaluated `threads` at a time but recorded in order, with the sequential
// search's stopping rule: the plan is the same for any thread count (a wave may evaluate a few
// candidates past the stop, which are dropped).
struct EppSearch {
  EppSearch(const Config& c, const cost::CostModel& m, std::span<const int64_t> l, int32_t r,
            int32_t t)
      : cfg(c), cm(m), lengths(l), fixed_r(r), threads(planner_thread_count(t)) {}

  const Config& cfg;
  const cost::CostModel& cm;
  std::span<const int64_t> lengths;
  int32_t fixed_r;                // static recompute count, -1 = adaptive
  size_t threads;                 // candidates evaluated side by side
  int32_t vpp = 1;                // virtual stages per rank of the pass (use_vpp)
  std::vector<StageSpec> stages;  // pp*vpp, set by use_vpp

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

  // The next passes search EPP on `v` virtual stages per rank (uniform layers, stage_layout).
  void use_vpp(int32_t v) {
    vpp = v;
    stages = stage_layout_planned(cfg, cm, pp(), v);
  }
  std::string vpp_label() const { return vpp > 1 ? fmt::format("vpp={}, ", vpp) : ""; }

  // Weights, gradients and optimizer state of rank r's stages.
  int64_t rank_static(int32_t r) const {
    const MemoryContext mem = memory();
    int64_t sum = 0;
    for (const StageSpec& st : stages)
      if (st.rank == r) sum += stage_static_bytes(cm, stage_shape(st), mem);
    return sum;
  }
  // Rank r's stages as one: what Eq. 14's estimate charges a chunk on that rank.
  cost::StageShape rank_shape(int32_t r) const {
    cost::StageShape sh = stage_shape(stages[r]);
    sh.num_layers = 0;
    for (const StageSpec& st : stages)
      if (st.rank == r) {
        sh.num_layers += st.num_layers;
        sh.has_lm_head = sh.has_lm_head || st.has_lm_head;
      }
    return sh;
  }

  // Weights alone over budget: no slicing helps.
  bool hopeless() const {
    int64_t max_static = 0;
    for (int32_t r = 0; r < pp(); ++r) max_static = std::max(max_static, rank_static(r));
    return max_static >= budget();
  }

  // Eq. 14's grouping: with adaptive recompute each pipeline the estimate puts over budget is
  // charged the greedy recompute solve (pipeline_grouping.h); a static count, the estimate.
  // `whole`: the solve of the one-pipeline plan, when the grouping made it.
  std::vector<int32_t> group_pipelines(const std::vector<Chunk>& chunks,
                                       const cost::StageShape& first, int64_t act_budget,
                                       std::shared_ptr<const SolvedRecompute>& whole) const {
    if (fixed_r >= 0) return epp_group_pipelines(chunks, pp(), cm, first, act_budget);
    PipelineRecomputeGreedy solver(cfg, cm, stages, vpp, lengths, chunks);
    auto groups = epp_group_pipelines_solved(chunks, pp(), cm, first, act_budget,
                                             solver.pipeline_recompute());
    if (!groups.empty() && groups.back() == 0) whole = solver.whole();
    return groups;
  }

  // The groupings of one candidate chunk list, tried in order until one fits: Eq. 14's, then
  // the finest. Pure: runs on any thread.
  std::vector<Attempt> evaluate_chunks(const std::vector<Chunk>& chunks) const {
    const cost::StageShape first = rank_shape(0);
    const int64_t act_budget = budget() - rank_static(0);
    std::shared_ptr<const SolvedRecompute> whole;
    auto groups = group_pipelines(chunks, first, act_budget, whole);
    std::string grouping = "Eq. 14 grouping";
    if (groups.empty()) {
      groups = finest_grouping(chunks);
      grouping = "finest grouping (none fits the Eq. 14 estimate)";
    }
    auto evaluate_grouping = [&](const std::vector<int32_t>& g,
                                 std::shared_ptr<const SolvedRecompute> solved) {
      CandidateSpec spec;
      spec.schedule = Schedule::epp;
      spec.vpp = vpp;
      spec.stages = &stages;
      spec.chunks = chunks;
      spec.pipeline_of_chunk = g;
      spec.static_recompute = fixed_r;
      spec.greedy = std::move(solved);
      return planner_evaluate(cfg, cm, lengths, std::move(spec));
    };
    std::vector<Attempt> out;
    for (int attempt = 0; attempt < 2; ++attempt) {
      out.push_back({evaluate_grouping(groups, attempt == 0 ? whole : nullptr), grouping});
      if (attempt == 0 && fixed_r < 0)
        keep_faster_linear(chunks, first, act_budget, groups, out.back(), evaluate_grouping);
      if (out.back().cand.fits) break;
      const auto finest = finest_grouping(chunks);
      if (groups == finest) break;
      groups = finest;  // the estimate was optimistic: every sequence run on its own
      grouping = "finest grouping (retry)";
    }
    return out;
  }

  // The solve-charged grouping is a heuristic too: where Eq. 14's linear grouping differs and
  // its plan is faster (or alone fits), that one is kept, so no K plans slower than before.
  template <class Evaluate>
  void keep_faster_linear(const std::vector<Chunk>& chunks, const cost::StageShape& first,
                          int64_t act_budget, std::vector<int32_t>& groups, Attempt& at,
                          const Evaluate& evaluate_grouping) const {
    auto linear = epp_group_pipelines(chunks, pp(), cm, first, act_budget);
    if (linear.empty() || linear == groups) return;
    Candidate c = evaluate_grouping(linear, nullptr);
    const bool slower =
        at.cand.fits && c.plan.predicted_step_time >= at.cand.plan.predicted_step_time;
    if (!c.fits || slower) return;
    at = {std::move(c), "Eq. 14 grouping, linear estimate"};
    groups = std::move(linear);
  }

  // Candidate `k` of the search (k = 0: the K = 1 packing of whole sequences). Pure.
  Evaluated evaluate(int32_t k, const cost::StageShape& ref, int64_t longest) const {
    Evaluated ev;
    if (k == 0) {
      ev.packed = pack_micro_batches(lengths, longest);
      ev.attempts = evaluate_chunks(ev.packed);
      return ev;
    }
    ev.k = k;
    ev.processed = sequence_process(lengths, k, cm, ref, cfg.parallel.min_tail_slice,
                                    cfg.parallel.epp_uniform_slicing);
    if (ev.processed->slices_of_longest != k && k > 1) return ev;  // skipped when recorded
    ev.attempts = evaluate_chunks(ev.processed->chunks);
    return ev;
  }

  // Records one candidate's attempts in order, up to the first that fits. `label` names the
  // slicing, `processed` the processor run that made the chunks, `pack_tokens` the capacity of
  // a K = 1 packing (0 for a processor run). Returns the step time of the attempt that fits,
  // +infinity when none does.
  double record(std::vector<Attempt>& attempts, int32_t k, const std::string& label,
                const ProcessorResult* processed, int64_t pack_tokens = 0) {
    for (Attempt& at : attempts) {
      Candidate& c = at.cand;
      ++knobs.candidates;
      least.offer(c);
      ExplainCandidate& ec =
          explain_record(explain, vpp_label() + label + ", " + at.grouping, k, c);
      ec.recompute_layers = fixed_r;
      ec.vpp = c.plan.vpp;
      ec.micro_batch_tokens = pack_tokens;
      if (!c.fits) continue;
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
    return std::numeric_limits<double>::infinity();
  }

  // Evaluates candidates [from, to) of `ks` (0 = the K = 1 packing), one thread each.
  std::vector<Evaluated> evaluate_wave(const std::vector<int32_t>& ks, size_t from, size_t to,
                                       const cost::StageShape& ref, int64_t longest) const {
    std::vector<Evaluated> out(to - from);
    if (to - from == 1) {
      out[0] = evaluate(ks[from], ref, longest);
      return out;
    }
    std::vector<std::exception_ptr> errors(to - from);
    std::vector<std::thread> pool;
    for (size_t i = from; i < to; ++i)
      pool.emplace_back([this, &out, &errors, &ks, &ref, longest, from, i] {
        try {
          out[i - from] = evaluate(ks[i], ref, longest);
        } catch (...) {
          errors[i - from] = std::current_exception();
        }
      });
    for (std::thread& t : pool) t.join();
    for (const std::exception_ptr& e : errors)  // the first in order, as one thread would throw
      if (e) std::rethrow_exception(e);
    return out;
  }

  // K = 1 with micro-batches of twice, four times, ... the longest sequence, as the baselines
  // tune theirs: fewer, larger chunks pay β1, the small-chunk inefficiency and the ZeRO-3
  // gathers fewer times, which wins where the bubble they grow is small (none at pp 1).
  // Doubling stops at the first capacity that is not faster than the one before (or does not
  // fit: larger ones hold more), or once a micro-batch holds the whole batch. Sequential, so
  // the plan is the same for any thread count.
  void search_capacities(int64_t longest, int64_t total, double packed_time) {
    double previous = packed_time;
    for (int64_t cap = 2 * longest; previous < std::numeric_limits<double>::infinity(); cap *= 2) {
      std::vector<Chunk> packed = pack_micro_batches(lengths, cap);
      std::vector<Attempt> attempts = evaluate_chunks(packed);
      const double t =
          record(attempts, 1, fmt::format("K=1, whole sequences packed (<= {} tokens)", cap),
                 nullptr, cap);
      if (!(t < previous) || cap >= total) return;
      previous = t;
    }
  }

  // One pass of the search on the current vpp: the K search, then larger micro-batches.
  void run() {
    int64_t longest = 0, total = 0;
    for (int64_t l : lengths) {
      longest = std::max(longest, l);
      total += l;
    }
    // Hopeless: one candidate (the finest) tells by how much. Else K = 1 is batch-level PP:
    // also try the tight token packing the batch-level schedules use (candidate 0), and larger.
    auto ks = sequence_slice_candidates(sequence_max_slices(lengths, cfg.parallel.min_tail_slice));
    if (hopeless()) {
      ks = {ks.back()};
      explain.notes.push_back(
          fmt::format("the weights alone exceed the budget: only K={} is tried", ks.back()));
      search_slices(ks, longest);
      return;
    }
    ks.insert(ks.begin(), 0);
    search_capacities(longest, total, search_slices(ks, longest));
  }

  // The K search over `ks` (0: the K = 1 packing at the longest sequence); returns that
  // packing's step time where it fits, else +infinity.
  double search_slices(const std::vector<int32_t>& ks, int64_t longest) {
    const cost::StageShape ref = processor_reference_stage(cm.model(), pp());
    double packed_time = std::numeric_limits<double>::infinity();
    for (size_t from = 0; from < ks.size();) {
      const size_t to = std::min(ks.size(), from + threads);
      std::vector<Evaluated> wave = evaluate_wave(ks, from, to, ref, longest);
      for (Evaluated& ev : wave) {
        if (!ev.processed) {
          packed_time = record(ev.attempts, 1,
                               fmt::format("K=1, whole sequences packed (<= {} tokens)", longest),
                               nullptr, longest);
          continue;
        }
        const int32_t k = ev.k;
        const ProcessorResult& pr = *ev.processed;
        if (pr.slices_of_longest != k && k > 1) {
          explain.notes.push_back(
              fmt::format("K={} skipped: the longest sequence splits into {} "
                          "slices, as with a smaller K",
                          k, pr.slices_of_longest));
          continue;
        }
        // This K's fastest grouping, fitting or not: when Eq. 14's grouping is over budget only
        // because its estimate was optimistic, its time says what a finer K could still reach.
        double reach = std::numeric_limits<double>::infinity();
        for (const Attempt& at : ev.attempts)
          reach = std::min(reach, at.cand.plan.predicted_step_time);
        record(ev.attempts, pr.slices_of_longest, fmt::format("K={}", pr.slices_of_longest), &pr);
        // Finer slicing only adds overhead once it has clearly lost (time is unimodal in K).
        if (have && reach > 1.1 * best.plan.predicted_step_time && k >= 2 * best_k + 2) {
          explain.notes.push_back(fmt::format(
              "search stopped after K={}: more than 10% slower than K={} (step time is unimodal "
              "in K, finer slicing only adds overhead)",
              k, best_k));
          return packed_time;
        }
      }
      from = to;
    }
    return packed_time;
  }
};

// Virtual stages per rank EPP searches: a forced layer split fixes them (the trainer's model is
// built on it); epp_exact_vpp asks for V alone; else vpp = 1 and, with --vpp V > 1, every v in
// 2..V whose stages get equal layer counts (as stage_layout does for vpp > 1; Config checks V).
std::vector<int32_t> epp_vpp_candidates(const Config& cfg) {
  const int64_t pp = cfg.parallel.pipeline_parallel;
  const int64_t forced = static_cast<int64_t>(cfg.parallel.stage_layers.size());
  if (forced > 0) return {static_cast<int32_t>(std::max<int64_t>(1, forced / pp))};
  if (cfg.parallel.epp_exact_vpp)
    return {static_cast<int32_t>(std::max<int64_t>(1, cfg.parallel.virtual_stages))};
  std::vector<int32_t> out{1};
  for (int64_t v = 2; pp > 1 && v <= cfg.parallel.virtual_stages; ++v)
    if (cfg.model.num_layers % (pp * v) == 0) out.push_back(static_cast<int32_t>(v));
  return out;
}

}  // namespace

PlanResult plan_epp(const Config& cfg, const cost::CostModel& cm, std::span<const int64_t> lengths,
                    int32_t threads) {
  const bool adaptive = cfg.parallel.recompute_granularity == RecomputeGranularity::adaptive;
  EppSearch search(cfg, cm, lengths,
                   adaptive ? -1 : megatron_recompute_layers(cfg.parallel, cm.model().num_layers),
                   threads);
  // One K search per vpp; the fastest plan that fits over all of them wins.
  for (int32_t v : epp_vpp_candidates(cfg)) {
    search.use_vpp(v);
    search.run();
  }
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
    const std::vector<StageSpec> stages = best.plan.stages;
    CandidateSpec spec;
    spec.schedule = Schedule::epp;
    spec.vpp = best.plan.vpp;
    spec.stages = &stages;
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
  knobs.vpp = best.plan.vpp;
  knobs.pipelines = best.plan.num_pipelines();
  knobs.recompute_layers = search.fixed_r;
  knobs.uniform_slicing = cfg.parallel.epp_uniform_slicing;
  knobs.recompute_time = best.recompute_time;
  knobs.recompute_gap = best.recompute_gap;
  return PlanResult{std::move(best.plan), knobs, std::move(ex)};
}

}  // namespace infinipipe::plan
