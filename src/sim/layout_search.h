// The parallel layout search: every (pp, vpp, Ulysses degree, dp, schedule) of a cluster, each
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
  bool operator==(const Layout&) const = default;
  std::string describe() const;  // "pp 4 x vpp 1 x ulysses 8 x dp 1, epp"
};

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
  int64_t tokens = 0;                // over the sampled batches
  const LayoutResult* best() const;  // nullptr when none is feasible
};

// Every layout of the space, in a fixed order (Ulysses degree, pp, schedule, vpp ascending; dp
// follows), the impossible ones included so the search can say why. ConfigError when the fixed
// degrees leave no product equal to the device count.
std::vector<Layout> layout_candidates(const Config& base, const LayoutSpace& space);

// The configuration `base` becomes under a layout on the space's cluster (not validated).
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
