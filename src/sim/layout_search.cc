#include "sim/layout_search.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/schedule_table.h"
#include "sim/layout_staged.h"

namespace infinipipe::sim {
namespace {

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
  const plan::VirtualStages runs = plan::schedule_row(s).virtual_stages;
  if (runs == plan::VirtualStages::none) return {1};
  std::vector<int64_t> out;
  const bool needs = runs == plan::VirtualStages::required;
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
        m.num_layers, l.pp, plan::schedule_name(l.schedule));
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
    plan::schedule_check_layout(c.parallel);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

const char* rank_order_text(RankOrder o) {
  return o == RankOrder::pipelines ? "pipelines on adjacent ranks" : "Megatron's order";
}

std::string Layout::describe() const {
  return fmt::format("pp {} x vpp {} x ulysses {} x dp {}, {}{}", pp,
                     vpp > 0 ? fmt::format("{}", vpp) : std::string("-"), ulysses, dp,
                     plan::schedule_name(schedule),
                     names_order() ? fmt::format(", {}", rank_order_text(order)) : "");
}

bool layout_links_span_hosts(const cost::HostLinkTable& links, const LayoutSpace& space) {
  if (links.empty()) return false;
  const std::vector<int64_t> host = links.host_of_ranks(space.num_devices);
  return std::any_of(host.begin(), host.end(), [&](int64_t h) { return h != host.front(); });
}

std::vector<RankOrder> layout_search_orders(const LayoutSpace& space,
                                            const cost::HostLinkTable& links) {
  if (!space.orders.empty()) return space.orders;
  if (layout_links_span_hosts(links, space)) return {RankOrder::megatron, RankOrder::pipelines};
  return {RankOrder::megatron};
}

const LayoutResult* LayoutSearchResult::best() const {
  return !ranked.empty() && ranked.front().feasible ? &ranked.front() : nullptr;
}

std::vector<Layout> layout_candidates(const Config& base, const LayoutSpace& space,
                                      const cost::HostLinkTable& links) {
  const int64_t n = space.num_devices;
  if (n < 1) fail_config("the layout search needs a device count >= 1, got {}", n);
  const std::vector<RankOrder> orders = layout_search_orders(space, links);
  const bool placed = layout_links_span_hosts(links, space);
  const int64_t per_node = space.devices_per_node > 0 ? space.devices_per_node : n;
  std::vector<Schedule> schedules = space.schedules;
  if (schedules.empty())
    for (const plan::ScheduleRow& r : plan::schedule_table()) schedules.push_back(r.id);
  std::vector<Layout> out;
  for (int64_t u : divisors(per_node)) {
    if (n % u != 0 || !fixed_or_equal(space.ulysses, u)) continue;
    for (int64_t pp : divisors(n / u)) {
      const int64_t dp = n / u / pp;
      if (!fixed_or_equal(space.pp, pp) || !fixed_or_equal(space.dp, dp)) continue;
      for (Schedule s : schedules)
        for (int64_t v : vpp_choices(s, pp, base.model.num_layers, space.vpp))
          for (RankOrder o : orders) out.push_back({pp, v, u, dp, s, o, placed});
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
  c.parallel.rank_placement =
      l.order == RankOrder::pipelines ? RankPlacement::pipelines : RankPlacement::megatron;
  c.cluster.num_devices = space.num_devices;
  c.cluster.devices_per_node =
      space.devices_per_node > 0 ? space.devices_per_node : space.num_devices;
  return c;
}

namespace {

// With host links: a Ulysses group whose devices lie on two hosts, named ("" when none). Its
// all-to-alls are priced inside a node, so like Config::validate's node rule the group stays
// inside a host (its devices are consecutive: the same in either rank order).
std::string ulysses_across_hosts(const cost::HostLinkTable& links, const LayoutSpace& space,
                                 const Layout& l) {
  if (links.empty() || l.ulysses < 2) return "";
  const std::vector<int64_t> host = links.host_of_ranks(space.num_devices);
  for (size_t d = 0; d < host.size(); ++d)
    if (d % static_cast<size_t>(l.ulysses) != 0 && host[d] != host[d - 1])
      return fmt::format(
          "ulysses {} puts devices {} and {} of one sequence-parallel group on hosts {} and {} "
          "(a group's all-to-alls stay inside a host)",
          l.ulysses, d - 1, d, links.hosts[static_cast<size_t>(host[d - 1])].name,
          links.hosts[static_cast<size_t>(host[d])].name);
  return "";
}

StagedLayout stage(const Config& base, const cost::CostModel& cm, const LayoutSpace& space,
                   const Layout& layout, std::span<const std::vector<int64_t>> batches) {
  std::string refusal = static_reason(base, space, layout);
  if (refusal.empty()) refusal = ulysses_across_hosts(cm.host_links(), space, layout);
  Config cfg = layout_config(base, space, layout);
  if (refusal.empty()) cfg.validate();
  return StagedLayout(cfg, cm, space, layout, batches, refusal);
}

}  // namespace

LayoutResult layout_evaluate(const Config& base, const cost::CostModel& cm,
                             const LayoutSpace& space, const Layout& layout,
                             std::span<const std::vector<int64_t>> batches) {
  StagedLayout s = stage(base, cm, space, layout, batches);
  while (!s.finished()) s.plan_next();
  return s.result();
}

// Branch and bound over the layouts, best first. The rule, which fixes the result: with B the
// best tokens/s of the layouts planned in full, a layout is reported as planned in full (or
// infeasible where a plan failed) iff its upper bound after each of its first plans is >= B;
// otherwise it is "not evaluated", at the first bound below B. Workers always plan the next
// replica share of the layout with the highest current upper bound that is at least the best
// found so far (which never exceeds B), so they plan at least what the rule needs, and stop
// when no layout's bound reaches the best. What they plan beyond it is set aside, so the result
// is the same whatever the thread count or the finishing order.
LayoutSearchResult layout_search(const Config& base, const cost::CostModel& cm,
                                 const LayoutSpace& space,
                                 std::span<const std::vector<int64_t>> batches) {
  if (batches.empty()) fail_config("the layout search needs at least one sampled batch");
  for (const auto& b : batches)
    if (b.empty()) fail_config("the layout search got an empty batch: sample non-empty batches");
  const std::vector<Layout> layouts = layout_candidates(base, space, cm.host_links());
  const size_t n = layouts.size();
  std::vector<StagedLayout> staged;
  staged.reserve(n);
  for (const Layout& l : layouts) staged.push_back(stage(base, cm, space, l, batches));

  std::vector<char> busy(n, 0);
  std::vector<std::exception_ptr> errors(n);
  double best = 0;
  int running = 0;
  std::mutex mu;
  std::condition_variable changed;
  auto pick = [&] {  // under mu; n when none
    size_t at = n;
    double top = -1;
    for (size_t i = 0; i < n; ++i) {
      if (busy[i] || errors[i] || staged[i].finished()) continue;
      const double upper = staged[i].upper();
      if ((space.exhaustive || upper >= best) && upper > top) {
        top = upper;
        at = i;
      }
    }
    return at;
  };
  auto work = [&] {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      const size_t i = pick();
      if (i == n) {
        if (running == 0) {
          changed.notify_all();
          return;
        }
        changed.wait(lock);
        continue;
      }
      busy[i] = 1;
      ++running;
      lock.unlock();
      std::exception_ptr e;
      try {
        staged[i].plan_next();
      } catch (...) {
        e = std::current_exception();
      }
      lock.lock();
      busy[i] = 0;
      --running;
      errors[i] = e;
      if (staged[i].finished() && staged[i].result().feasible)
        best = std::max(best, staged[i].result().tokens_per_s);
      changed.notify_all();
    }
  };
  const int threads = std::clamp<int>(space.threads, 1, static_cast<int>(std::max<size_t>(1, n)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);  // the first in enumeration order

  std::vector<LayoutResult> results(n);
  for (size_t i = 0; i < n; ++i) {
    const StagedLayout& s = staged[i];
    size_t planned = 0;
    bool stop = false;
    while (planned < s.plans()) {
      stop = !space.exhaustive && s.upper_after(planned) < best;
      if (stop || planned == s.planned()) break;
      ++planned;
    }
    if (!stop) {
      if (!s.finished()) fail("layout search: {} stopped before the rule", layouts[i].describe());
      results[i] = s.result();
      continue;
    }
    LayoutResult& r = results[i];
    r.layout = layouts[i];
    r.evaluated = false;
    r.bound_tokens_per_s = s.upper_after(0);
    const double upper = s.upper_after(planned);
    r.stop_bound_tokens_per_s = upper;
    r.plans_made = static_cast<int64_t>(planned);
    r.replica_plans = static_cast<int64_t>(s.plans());
    r.reason = planned == 0
                   ? fmt::format("not evaluated: at most {:.0f} tokens/s, below the best {:.0f}",
                                 upper, best)
                   : fmt::format(
                         "not evaluated: at most {:.0f} tokens/s after {} of {} replica "
                         "plans, below the best {:.0f}",
                         upper, planned, s.plans(), best);
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
  if (!cm.host_links().empty()) {
    const std::vector<int64_t> host = cm.host_links().host_of_ranks(space.num_devices);
    out.link_hosts = static_cast<int64_t>(std::set<int64_t>(host.begin(), host.end()).size());
  }
  for (const auto& b : batches)
    for (int64_t len : b) out.tokens += std::min(len, base.model.seq_length);
  for (size_t i : ranking) out.ranked.push_back(std::move(results[i]));
  return out;
}

}  // namespace infinipipe::sim
