#include "sim/layout_search.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <numeric>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/budget_error.h"
#include "plan/planner.h"
#include "sim/layout_hosts.h"
#include "sim/simulator.h"

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

LayoutResult layout_evaluate(const Config& base, const cost::CostModel& cm,
                             const LayoutSpace& space, const Layout& layout,
                             std::span<const std::vector<int64_t>> batches) {
  LayoutResult r;
  r.layout = layout;
  r.reason = static_reason(base, space, layout);
  if (!r.reason.empty()) return r;
  Config cfg = layout_config(base, space, layout);
  cfg.validate();
  // Ulysses groups stay inside a node (static_reason refused the rest through validate).
  const cost::CostModel g = cm.with_ulysses_degree(layout.ulysses, false);
  r.budget_bytes = plan::planner_budget(cfg, g);
  int64_t tokens = 0;
  double total_step = 0;
  for (size_t b = 0; b < batches.size(); ++b) {
    const std::vector<int64_t>& batch = batches[b];
    const std::vector<std::vector<int64_t>> shares =
        layout.dp == 1 ? std::vector<std::vector<int64_t>>{batch}
                       : plan::balance_replicas(batch, layout.dp, g, cfg);
    double step = 0;
    for (size_t k = 0; k < shares.size(); ++k) {
      const std::string where = batches.size() > 1 || shares.size() > 1
                                    ? fmt::format(" (batch {}, replica {})", b, k)
                                    : "";
      const cost::CostModel gk =
          layout_replica_cost_model(g, space, layout, static_cast<int64_t>(k));
      try {
        const plan::PlanResult p = plan::make_plan_detailed(cfg, gk, shares[k], layout.schedule);
        const StepResult st = simulate(p.plan, gk, cfg);
        if (st.oom) {
          const int64_t peak = *std::max_element(st.peak_bytes.begin(), st.peak_bytes.end());
          r.reason = fmt::format("over budget by {} in simulation: peak {} per device, budget {}{}",
                                 format_bytes(peak - r.budget_bytes), format_bytes(peak),
                                 format_bytes(r.budget_bytes), where);
          return r;
        }
        if (b == 0 && k == 0) r.setting = p.knobs.describe();
        step = std::max(step, st.step_time);
        take_peaks(r.peak_bytes, st.peak_bytes);
      } catch (const plan::BudgetError& e) {
        r.reason = fmt::format("over budget by {}: needs {} per device, budget {}{}",
                               format_bytes(e.least_budget() - r.budget_bytes),
                               format_bytes(e.least_budget()), format_bytes(r.budget_bytes), where);
        return r;
      } catch (const ConfigError& e) {
        r.reason =
            fmt::format("{} cannot run it: {}{}", schedule_name(layout.schedule), e.what(), where);
        return r;
      } catch (const Error& e) {
        r.reason = fmt::format("planning failed: {}{}", e.what(), where);
        return r;
      }
    }
    for (int64_t len : batch) tokens += std::min(len, cfg.model.seq_length);
    total_step += step;
  }
  r.feasible = true;
  r.tokens_per_s = static_cast<double>(tokens) / total_step;
  r.mean_step_s = total_step / static_cast<double>(batches.size());
  return r;
}

LayoutSearchResult layout_search(const Config& base, const cost::CostModel& cm,
                                 const LayoutSpace& space,
                                 std::span<const std::vector<int64_t>> batches) {
  if (batches.empty()) fail_config("the layout search needs at least one sampled batch");
  for (const auto& b : batches)
    if (b.empty()) fail_config("the layout search got an empty batch: sample non-empty batches");
  const std::vector<Layout> layouts = layout_candidates(base, space);
  std::vector<LayoutResult> results(layouts.size());
  std::vector<std::exception_ptr> errors(layouts.size());
  std::atomic<size_t> next{0};
  // Each worker takes the next layout; results land at the layout's index, so the ranking is the
  // same whatever the thread count or the order they finish in.
  auto work = [&] {
    for (size_t i = next++; i < layouts.size(); i = next++) {
      try {
        results[i] = layout_evaluate(base, cm, space, layouts[i], batches);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const int threads =
      std::clamp<int>(space.threads, 1, static_cast<int>(std::max<size_t>(1, layouts.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);  // the first in enumeration order: deterministic

  std::vector<size_t> order(layouts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const LayoutResult &x = results[a], &y = results[b];
    if (x.feasible != y.feasible) return x.feasible;
    return x.feasible && x.tokens_per_s > y.tokens_per_s;
  });
  LayoutSearchResult out;
  out.batches = static_cast<int64_t>(batches.size());
  for (const auto& b : batches)
    for (int64_t len : b) out.tokens += std::min(len, base.model.seq_length);
  for (size_t i : order) out.ranked.push_back(std::move(results[i]));
  return out;
}

}  // namespace infinipipe::sim
