#include "sim/layout_search.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/budget_error.h"
#include "plan/planner.h"
#include "sim/simulator.h"
#include "sim/step_bound.h"

namespace infinipipe::sim {
namespace {

constexpr Schedule kAllSchedules[] = {Schedule::epp, Schedule::one_f_one_b, Schedule::interleaved,
                                      Schedule::gpipe, Schedule::seq1f1b};

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

bool fixed_or_equal(int64_t fixed, int64_t v) {
  return fixed == 0 || fixed == v;
}

// vpp values a schedule can run at pp: 1 when it runs no virtual stages; else every v >= 2 that
// splits the layers evenly into pp * v stages (and 1 when virtual stages are optional). 0 stands
// for "none divides", so the layout is listed with that reason.
std::vector<int64_t> vpp_choices(Schedule s, int64_t pp, int64_t layers, int64_t fixed) {
  if (fixed > 0) return {fixed};
  if (!schedule_takes_virtual_stages(s)) return {1};
  std::vector<int64_t> out;
  const bool needs = schedule_needs_virtual_stages(s);
  if (!needs) out.push_back(1);
  if (!needs && pp == 1) return out;  // EPP plans one stage per rank at pp 1 whatever vpp says
  // One pipeline rank runs its virtual stages back to back: one row says whether the planner
  // takes that at all, rather than one per vpp with the same answer.
  if (needs && pp == 1) return {std::min<int64_t>(2, std::max<int64_t>(layers, 1))};
  for (int64_t v = 2; pp * v <= layers; ++v)
    if (layers % (pp * v) == 0) out.push_back(v);
  if (out.empty()) out.push_back(0);
  return out;
}

// Why a layout cannot run before planning it ("" when it may): the constraints in words.
std::string static_reason(const Config& base, const LayoutSpace& space, const Layout& l) {
  const ModelConfig& m = base.model;
  if (m.num_attention_heads % l.ulysses != 0 || m.kv_heads() % l.ulysses != 0)
    return fmt::format(
        "ulysses {} does not divide the {} attention heads and {} query groups (heads are "
        "scattered over the sequence-parallel group)",
        l.ulysses, m.num_attention_heads, m.kv_heads());
  if (l.vpp == 0)
    return fmt::format(
        "num-layers {} is not divisible by pp {} x vpp for any vpp >= 2 ({} needs "
        "equal virtual stages)",
        m.num_layers, l.pp, schedule_name(l.schedule));
  if (m.num_layers < l.pp * l.vpp)
    return fmt::format("num-layers {} is fewer than the pp {} x vpp {} = {} stages", m.num_layers,
                       l.pp, l.vpp, l.pp * l.vpp);
  if (l.vpp > 1 && m.num_layers % (l.pp * l.vpp) != 0)
    return fmt::format("num-layers {} is not divisible by pp {} x vpp {}", m.num_layers, l.pp,
                       l.vpp);
  if (base.training.global_batch_size < l.dp)
    return fmt::format(
        "global batch of {} sequences is smaller than dp {}: every replica needs one",
        base.training.global_batch_size, l.dp);
  Config c = layout_config(base, space, l);
  try {
    c.validate();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

void take_peaks(std::vector<int64_t>& into, const std::vector<int64_t>& peaks) {
  if (into.size() < peaks.size()) into.resize(peaks.size(), 0);
  for (size_t i = 0; i < peaks.size(); ++i) into[i] = std::max(into[i], peaks[i]);
}

}  // namespace

std::string Layout::describe() const {
  return fmt::format("pp {} x vpp {} x ulysses {} x dp {}, {}", pp,
                     vpp > 0 ? fmt::format("{}", vpp) : std::string("-"), ulysses, dp,
                     schedule_name(schedule));
}

const LayoutResult* LayoutSearchResult::best() const {
  return !ranked.empty() && ranked.front().feasible ? &ranked.front() : nullptr;
}

bool schedule_takes_virtual_stages(Schedule s) {
  ParallelConfig p;
  p.pipeline_parallel = 2;
  p.virtual_stages = 2;
  p.schedule = s;
  try {
    p.validate();
  } catch (const ConfigError&) {
    return false;
  }
  return true;
}

bool schedule_needs_virtual_stages(Schedule s) {
  ParallelConfig p;
  p.pipeline_parallel = 2;
  p.schedule = s;
  try {
    p.validate();
  } catch (const ConfigError&) {
    return true;
  }
  return false;
}

std::vector<Layout> layout_candidates(const Config& base, const LayoutSpace& space) {
  const int64_t n = space.num_devices;
  if (n < 1) fail_config("the layout search needs a device count >= 1, got {}", n);
  const int64_t per_node = space.devices_per_node > 0 ? space.devices_per_node : n;
  std::vector<Schedule> schedules = space.schedules;
  if (schedules.empty()) schedules.assign(std::begin(kAllSchedules), std::end(kAllSchedules));
  std::vector<Layout> out;
  for (int64_t u : divisors(per_node)) {
    if (n % u != 0 || !fixed_or_equal(space.ulysses, u)) continue;
    for (int64_t pp : divisors(n / u)) {
      const int64_t dp = n / u / pp;
      if (!fixed_or_equal(space.pp, pp) || !fixed_or_equal(space.dp, dp)) continue;
      for (Schedule s : schedules)
        for (int64_t v : vpp_choices(s, pp, base.model.num_layers, space.vpp))
          out.push_back({pp, v, u, dp, s});
    }
  }
  if (out.empty())
    fail_config(
        "no layout of {} devices ({} per node) has{}{}{}: pp x ulysses x dp must equal the device "
        "count and ulysses must divide the devices of a node; change the fixed degrees",
        n, per_node, space.pp > 0 ? fmt::format(" pp {}", space.pp) : "",
        space.ulysses > 0 ? fmt::format(" ulysses {}", space.ulysses) : "",
        space.dp > 0 ? fmt::format(" dp {}", space.dp) : "");
  return out;
}

Config layout_config(const Config& base, const LayoutSpace& space, const Layout& l) {
  Config c = base;
  c.parallel.pipeline_parallel = l.pp;
  c.parallel.virtual_stages = std::max<int64_t>(1, l.vpp);
  c.parallel.layers_per_virtual_stage = 0;
  c.parallel.ulysses_degree = l.ulysses;
  c.parallel.data_parallel = l.dp;
  c.parallel.schedule = l.schedule;
  c.parallel.stage_layers.clear();
  c.parallel.epp_exact_vpp = true;  // each vpp is a layout of its own, ranked as train runs it
  c.cluster.num_devices = space.num_devices;
  c.cluster.devices_per_node =
      space.devices_per_node > 0 ? space.devices_per_node : space.num_devices;
  return c;
}

namespace {

// One replica's share of one sampled batch, and the step bound of its plan.
struct Unit {
  size_t batch = 0, replica = 0;
  std::vector<int64_t> lengths;
  double bound = 0;
};

// A layout planned unit by unit, the units in order of decreasing bound (ties in (batch,
// replica) order), so the slowest replicas come first and a layout that cannot win shows it
// early.
struct Staged {
  LayoutResult result;       // complete: the layout's result (feasible or not)
  std::vector<Unit> units;   // in planning order
  std::vector<double> steps;  // the planned units' steps, in that order
  size_t batches = 0;
  int64_t tokens = 0;
  bool complete = false;  // every unit planned, or one failed (result.reason says why)
  // Upper bound on tokens/s once the first `planned` units have their steps: a batch's step is
  // at least its planned units' steps and its other units' bounds.
  double upper_after(size_t planned) const {
    std::vector<double> step(batches, 0.0);
    for (size_t j = 0; j < units.size(); ++j)
      step[units[j].batch] =
          std::max(step[units[j].batch], j < planned ? steps[j] : units[j].bound);
    double total = 0;
    for (double x : step) total += x;
    if (!(total > 0)) return std::numeric_limits<double>::infinity();
    return static_cast<double>(tokens) / total;
  }
};

Staged stage_units(const Config& cfg, const cost::CostModel& g, const Layout& layout,
                   std::span<const std::vector<int64_t>> batches) {
  Staged s;
  s.batches = batches.size();
  for (size_t b = 0; b < batches.size(); ++b) {
    const std::vector<int64_t>& batch = batches[b];
    for (int64_t len : batch) s.tokens += std::min(len, cfg.model.seq_length);
    std::vector<std::vector<int64_t>> shares =
        layout.dp == 1 ? std::vector<std::vector<int64_t>>{batch}
                       : plan::balance_replicas(batch, layout.dp, g, cfg);
    for (size_t k = 0; k < shares.size(); ++k) {
      const double bound = step_lower_bound(g, cfg, shares[k]);
      s.units.push_back({b, k, std::move(shares[k]), bound});
    }
  }
  std::stable_sort(s.units.begin(), s.units.end(),
                   [](const Unit& x, const Unit& y) { return x.bound > y.bound; });
  return s;
}

// Plans the units in order until one fails, all are planned, or the upper bound falls below
// `threshold` (0: never).
Staged evaluate_staged(const Config& base, const cost::CostModel& cm, const LayoutSpace& space,
                       const Layout& layout, std::span<const std::vector<int64_t>> batches,
                       double threshold) {
  LayoutResult r;
  r.layout = layout;
  r.reason = static_reason(base, space, layout);
  if (!r.reason.empty()) {
    Staged refused;
    refused.result = r;
    refused.complete = true;
    return refused;
  }
  Config cfg = layout_config(base, space, layout);
  cfg.validate();
  // Ulysses groups stay inside a node (static_reason refused the rest through validate).
  const cost::CostModel g = cm.with_ulysses_degree(layout.ulysses, false);
  Staged s = stage_units(cfg, g, layout, batches);
  r.budget_bytes = plan::planner_budget(cfg, g);
  r.bound_tokens_per_s = s.upper_after(0);
  const bool named = s.units.size() > 1;
  for (size_t j = 0; j < s.units.size(); ++j) {
    if (s.upper_after(j) < threshold) {
      s.result = r;
      return s;
    }
    const Unit& u = s.units[j];
    const std::string where =
        named ? fmt::format(" (batch {}, replica {})", u.batch, u.replica) : "";
    try {
      const plan::PlanResult p = plan::make_plan_detailed(cfg, g, u.lengths, layout.schedule);
      const StepResult st = simulate(p.plan, g, cfg);
      if (st.oom) {
        const int64_t peak = *std::max_element(st.peak_bytes.begin(), st.peak_bytes.end());
        r.reason = fmt::format("over budget by {} in simulation: peak {} per device, budget {}{}",
                               format_bytes(peak - r.budget_bytes), format_bytes(peak),
                               format_bytes(r.budget_bytes), where);
      } else {
        if (u.batch == 0 && u.replica == 0) r.setting = p.knobs.describe();
        s.steps.push_back(st.step_time);
        take_peaks(r.peak_bytes, st.peak_bytes);
      }
    } catch (const plan::BudgetError& e) {
      r.reason = fmt::format("over budget by {}: needs {} per device, budget {}{}",
                             format_bytes(e.least_budget() - r.budget_bytes),
                             format_bytes(e.least_budget()), format_bytes(r.budget_bytes), where);
    } catch (const ConfigError& e) {
      r.reason =
          fmt::format("{} cannot run it: {}{}", schedule_name(layout.schedule), e.what(), where);
    } catch (const Error& e) {
      r.reason = fmt::format("planning failed: {}{}", e.what(), where);
    }
    if (!r.reason.empty()) {
      r.peak_bytes.clear();
      s.result = r;
      s.complete = true;
      return s;
    }
  }
  double total_step = 0;
  std::vector<double> step(s.batches, 0.0);
  for (size_t j = 0; j < s.units.size(); ++j)
    step[s.units[j].batch] = std::max(step[s.units[j].batch], s.steps[j]);
  for (double x : step) total_step += x;
  r.feasible = true;
  r.tokens_per_s = static_cast<double>(s.tokens) / total_step;
  r.mean_step_s = total_step / static_cast<double>(batches.size());
  s.result = r;
  s.complete = true;
  return s;
}

}  // namespace

LayoutResult layout_evaluate(const Config& base, const cost::CostModel& cm,
                             const LayoutSpace& space, const Layout& layout,
                             std::span<const std::vector<int64_t>> batches) {
  return evaluate_staged(base, cm, space, layout, batches, 0.0).result;
}

double layout_bound_tokens_per_s(const Config& base, const cost::CostModel& cm,
                                 const LayoutSpace& space, const Layout& layout,
                                 std::span<const std::vector<int64_t>> batches) {
  if (!static_reason(base, space, layout).empty()) return 0.0;
  Config cfg = layout_config(base, space, layout);
  cfg.validate();
  const cost::CostModel g = cm.with_ulysses_degree(layout.ulysses, false);
  return stage_units(cfg, g, layout, batches).upper_after(0);
}

LayoutSearchResult layout_search(const Config& base, const cost::CostModel& cm,
                                 const LayoutSpace& space,
                                 std::span<const std::vector<int64_t>> batches) {
  if (batches.empty()) fail_config("the layout search needs at least one sampled batch");
  for (const auto& b : batches)
    if (b.empty()) fail_config("the layout search got an empty batch: sample non-empty batches");
  const std::vector<Layout> layouts = layout_candidates(base, space);
  const size_t n = layouts.size();
  std::vector<LayoutResult> results(n);
  std::vector<double> bound(n, 0.0);
  // Layouts refused before planning say why at once; the others are planned in order of
  // decreasing bound, ties in enumeration order.
  std::vector<size_t> order;
  for (size_t i = 0; i < n; ++i) {
    if (static_reason(base, space, layouts[i]).empty()) {
      bound[i] = layout_bound_tokens_per_s(base, cm, space, layouts[i], batches);
      order.push_back(i);
    } else {
      results[i] = layout_evaluate(base, cm, space, layouts[i], batches);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bound[a] > bound[b]; });
  const size_t m = order.size();

  // The rule, defined sequentially: the layout at position p stops being planned (after j of
  // its replica plans, j = 0 before any) as soon as its upper bound is below the best tokens/s
  // of the layouts complete before p. Workers plan positions in parallel against the best of
  // the positions before p done so far, never above that best, so each plans at least as far
  // as the rule; the rule is applied after the join, position by position, so the result is
  // the same whatever the thread count or finishing order.
  std::vector<Staged> staged(m);
  std::vector<std::exception_ptr> errors(m);
  std::vector<char> done(m, 0);
  std::mutex mu;
  std::atomic<size_t> next{0};
  auto known_best_before = [&](size_t p) {
    double best = 0;
    for (size_t q = 0; q < p; ++q)
      if (done[q] && staged[q].complete && staged[q].result.feasible)
        best = std::max(best, staged[q].result.tokens_per_s);
    return best;
  };
  auto work = [&] {
    for (size_t p = next++; p < m; p = next++) {
      double threshold = 0;
      if (!space.exhaustive) {
        std::lock_guard<std::mutex> lock(mu);
        threshold = known_best_before(p);
      }
      Staged s;
      std::exception_ptr e;
      try {
        s = evaluate_staged(base, cm, space, layouts[order[p]], batches, threshold);
      } catch (...) {
        e = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu);
      staged[p] = std::move(s);
      errors[p] = e;
      done[p] = 1;
    }
  };
  const int threads = std::clamp<int>(space.threads, 1, static_cast<int>(std::max<size_t>(1, m)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();

  double best = 0;
  for (size_t p = 0; p < m; ++p) {
    if (errors[p]) std::rethrow_exception(errors[p]);  // the first in bound order
    const size_t i = order[p];
    const Staged& s = staged[p];
    LayoutResult& r = results[i];
    // Replay the rule against the best of the layouts before p.
    size_t planned = 0;
    bool stop = false;
    while (planned < s.units.size()) {
      stop = !space.exhaustive && s.upper_after(planned) < best;
      if (stop || planned == s.steps.size()) break;
      ++planned;
    }
    if (stop) {
      r = LayoutResult{};
      r.layout = layouts[i];
      r.evaluated = false;
      r.bound_tokens_per_s = bound[i];
      const double upper = s.upper_after(planned);
      r.reason =
          planned == 0
              ? fmt::format("not evaluated: at most {:.0f} tokens/s, below the best {:.0f}",
                            upper, best)
              : fmt::format("not evaluated: at most {:.0f} tokens/s after {} of {} replica "
                            "plans, below the best {:.0f}",
                            upper, planned, s.units.size(), best);
      continue;
    }
    if (!s.complete) fail("layout search: {} stopped before the rule", layouts[i].describe());
    r = s.result;
    r.bound_tokens_per_s = bound[i];
    if (r.feasible) best = std::max(best, r.tokens_per_s);
  }

  std::vector<size_t> ranking(n);
  std::iota(ranking.begin(), ranking.end(), 0);
  auto group = [&](size_t i) { return results[i].feasible ? 0 : results[i].evaluated ? 2 : 1; };
  std::stable_sort(ranking.begin(), ranking.end(), [&](size_t a, size_t b) {
    const LayoutResult &x = results[a], &y = results[b];
    if (group(a) != group(b)) return group(a) < group(b);
    if (x.feasible) return x.tokens_per_s > y.tokens_per_s;
    if (!x.evaluated) return x.bound_tokens_per_s > y.bound_tokens_per_s;
    return false;
  });
  LayoutSearchResult out;
  out.batches = static_cast<int64_t>(batches.size());
  for (const auto& b : batches)
    for (int64_t len : b) out.tokens += std::min(len, base.model.seq_length);
  for (size_t i : ranking) out.ranked.push_back(std::move(results[i]));
  return out;
}

}  // namespace infinipipe::sim
