// The parallel layout search: every (pp, vpp, Ulysses degree, dp, schedule) of a cluster, and
// with measured links between hosts every rank order too (which ranks form a pipeline), each
// planned and simulated on a sample of the user's global batches (each batch split over the dp
// replicas as training splits it, plan::balance_replicas), ranked by predicted tokens/s, with
// each layout's peak memory per stage; a layout that cannot run says why, one whose bound cannot
// beat the best is left not evaluated (docs/cost-model.md, "Layout search").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::sim {

struct Layout {
  int64_t pp = 1;
  int64_t vpp = 1;  // 0: a schedule that needs virtual stages, where no vpp divides the layers
  int64_t ulysses = 1;
  int64_t dp = 1;
  Schedule schedule = Schedule::epp;
  // Which ranks form a pipeline (core/config.h). It matters where the cost model has links
  // between hosts (cost/host_link_table.h: they decide which transfers cross the slow link) and
  // where the ranks' hosts share cores (LayoutSpace::rank_hosts).
  RankOrder order = RankOrder::megatron;
  // The order was weighed with links between two hosts or more: describe() and the report name
  // it even when it is Megatron's.
  bool placed = false;
  bool operator==(const Layout&) const = default;
  // "pp 4 x vpp 1 x ulysses 8 x dp 1, epp", then ", Megatron's order" or ", pipelines on
  // adjacent ranks" when placed or not Megatron's.
  std::string describe() const;
  bool names_order() const { return placed || order != RankOrder::megatron; }
};

// "Megatron's order" or "pipelines on adjacent ranks".
const char* rank_order_text(RankOrder o);

// What the search may choose. A degree > 0 is fixed, 0 is searched.
struct LayoutSpace {
  int64_t num_devices = 0;       // pp * ulysses * dp must equal it
  int64_t devices_per_node = 0;  // Ulysses groups stay inside a node (Config::validate's rule)
  int64_t pp = 0, vpp = 0, ulysses = 0, dp = 0;
  std::vector<Schedule> schedules;  // empty = every schedule
  int threads = 1;                  // layouts evaluated at once; the result does not depend on it
  // false: a layout stops being planned once its upper bound on tokens/s (step_bound.h, then
  // its slowest replicas' steps) is below the best layout's (layout_search); true: every layout
  // is planned.
  bool exhaustive = false;
  // Where each device's rank runs, in MPI rank order (sim/layout_hosts.h): each replica is
  // planned with its pipeline's hosts, as train plans it. Empty: a core per rank.
  std::vector<cost::RankHost> rank_hosts;
  // The rank orders to rank. Empty: searched, both where the cost model's host links put the
  // devices on two hosts or more (layout_search_orders), else Megatron's alone, as before.
  std::vector<RankOrder> orders;
};

struct LayoutResult {
  Layout layout;
  bool feasible = false;
  // false: skipped, its bound cannot beat the best layout (then feasible is false and reason
  // says "not evaluated: ...").
  bool evaluated = true;
  std::string reason;  // infeasible or not evaluated: why, in words
  // Over the sampled batches, at most this many tokens/s before any plan (step_lower_bound of
  // every replica share); 0 when the layout cannot run for a reason seen before planning,
  // +infinity when no bound applies.
  double bound_tokens_per_s = 0;
  // Not evaluated: the upper bound it stopped at (below the best), after this many of its
  // `replica_plans` plans (replica shares over the batches).
  double stop_bound_tokens_per_s = 0;
  int64_t plans_made = 0, replica_plans = 0;
  // Over the sampled batches: their tokens over the sum of their step times (a batch's step is
  // its slowest replica's).
  double tokens_per_s = 0;
  double mean_step_s = 0;
  std::vector<int64_t> peak_bytes;  // per pipeline rank, the largest over batches and replicas
  int64_t budget_bytes = 0;
  std::string setting;  // the first batch's tuned knobs (PlanKnobs::describe)
};

struct LayoutSearchResult {
  // Feasible layouts, fastest first (ties in enumeration order), then the ones not evaluated
  // (highest bound first), then the infeasible ones in enumeration order.
  std::vector<LayoutResult> ranked;
  int64_t batches = 0;
  int64_t tokens = 0;  // over the sampled batches
  // Hosts the cost model's host links place the devices on (0 without host links).
  int64_t link_hosts = 0;
  const LayoutResult* best() const;  // nullptr when none is feasible
};

// Whether `links` place the space's devices on two hosts or more (ConfigError when the table has
// fewer slots than devices and no measured placement covering them).
bool layout_links_span_hosts(const cost::HostLinkTable& links, const LayoutSpace& space);

// The rank orders the search ranks: space.orders when given, else both (Megatron's first) when
// the links span two hosts or more, else Megatron's alone.
std::vector<RankOrder> layout_search_orders(const LayoutSpace& space,
                                            const cost::HostLinkTable& links);

// Every layout of the space, in a fixed order (Ulysses degree, pp, schedule, vpp, rank order
// ascending; dp follows), the impossible ones included so the search can say why. `links`: the
// cost model's host links (empty: Megatron's order alone, unless space.orders says otherwise).
// ConfigError when the fixed degrees leave no product equal to the device count.
std::vector<Layout> layout_candidates(const Config& base, const LayoutSpace& space,
                                      const cost::HostLinkTable& links = {});

// The configuration `base` becomes under a layout on the space's cluster (not validated); its
// rank placement is the layout's order (what the simulator prices the all-reduce with).
Config layout_config(const Config& base, const LayoutSpace& space, const Layout& layout);

// Plans and simulates one layout on every batch. `cm` is the cost model of `base` (its Ulysses
// degree is rescaled to the layout's).
LayoutResult layout_evaluate(const Config& base, const cost::CostModel& cm,
                             const LayoutSpace& space, const Layout& layout,
                             std::span<const std::vector<int64_t>> batches);

// Evaluates the candidates on space.threads threads, best first over their replica plans,
// leaving those that cannot beat the best not evaluated (unless space.exhaustive), and ranks
// them. The same result, byte for byte, whatever the thread count. ConfigError when the batches
// are empty.
LayoutSearchResult layout_search(const Config& base, const cost::CostModel& cm,
                                 const LayoutSpace& space,
                                 std::span<const std::vector<int64_t>> batches);

}  // namespace infinipipe::sim
