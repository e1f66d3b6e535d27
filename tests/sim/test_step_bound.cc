// The step lower bound the layout search prunes with (sim/step_bound.h) against the simulated
// step of real plans: every schedule, pp, vpp, Ulysses degree and dp of a small cluster, long-tail
// batches under budgets tight enough to slice, pack into hybrid chunks, recompute and run several
// EPP pipelines, with shared and per-rank coefficients. Pruning is safe only while this holds.
#include "sim/step_bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/small_layout_model.h"
#include "core/error.h"
#include "plan/planner.h"
#include "sim/layout_search.h"
#include "sim/simulator.h"

namespace infinipipe::sim {
namespace {

Config bound_cluster(int64_t devices, int64_t per_node) {
  return testing::small_layout_model(devices, per_node, 12);
}

// Long-tail lengths from a seeded linear congruential stream: a few long, most short.
std::vector<int64_t> long_tail(uint64_t seed, int64_t count, int64_t longest) {
  uint64_t x = seed;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < count; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(x >> 11) / 9007199254740992.0;
    out.push_back(std::max<int64_t>(32, static_cast<int64_t>(longest * u * u * u)));
  }
  return out;
}

struct Seen {
  int plans = 0, split = 0, hybrid = 0, packed = 0, recompute = 0, pipelines = 0, vpp = 0, dp = 0,
      ulysses = 0, rank_costs = 0, forced = 0;  // forced: the budget raised the bound
  double tightest = 0;                          // the largest bound / step seen
};

void tally(const plan::Plan& p, const Layout& l, bool rank_costs, Seen& seen) {
  ++seen.plans;
  bool split = false, hybrid = false, packed = false, recompute = false;
  for (const plan::Chunk& c : p.chunks) {
    split = split || c.kind() == plan::ChunkKind::split;
    hybrid = hybrid || c.kind() == plan::ChunkKind::hybrid;
    packed = packed || (c.kind() == plan::ChunkKind::batched && c.slices.size() > 1);
  }
  for (const auto& list : p.actions)
    for (const plan::Action& a : list) recompute = recompute || a.recompute_layers > 0;
  seen.split += split;
  seen.hybrid += hybrid;
  seen.packed += packed;
  seen.recompute += recompute;
  seen.pipelines += p.num_pipelines() > 1;
  seen.vpp += l.vpp > 1;
  seen.dp += l.dp > 1;
  seen.ulysses += l.ulysses > 1;
  seen.rank_costs += rank_costs;
}

// Each layout of the cluster that plans: every replica's simulated step is at least the bound
// of its share.
void expect_bound_below_every_plan(const Config& base, const std::vector<int64_t>& batch,
                                   bool rank_costs, Seen& seen) {
  LayoutSpace space;
  space.num_devices = base.cluster.num_devices;
  space.devices_per_node = base.cluster.devices_per_node;
  for (const Layout& l : layout_candidates(base, space)) {
    Config cfg = layout_config(base, space, l);
    try {
      cfg.validate();
    } catch (const ConfigError&) {
      continue;
    }
    cost::CostModel g = cost::CostModel::from_config(base).with_ulysses_degree(l.ulysses, 0);
    if (rank_costs) {  // one fast and one slow rank, the rest shared
      std::vector<cost::Coefficients> per(static_cast<size_t>(l.pp), g.coefficients());
      per[0].alpha1 *= 0.6;
      per[0].alpha2 *= 0.7;
      per.back().alpha2 *= 1.5;
      per.back().beta1 *= 3;
      g = g.with_rank_coefficients(per);
    }
    const auto shares = l.dp == 1 ? std::vector<std::vector<int64_t>>{batch}
                                  : plan::balance_replicas(batch, l.dp, g, cfg);
    for (const auto& share : shares) {
      try {
        const plan::PlanResult r = plan::make_plan_detailed(cfg, g, share, l.schedule);
        const StepResult st = simulate(r.plan, g, cfg);
        const double bound = step_lower_bound(g, cfg, share);
        EXPECT_GT(bound, 0) << l.describe();
        EXPECT_LE(bound, st.step_time)
            << l.describe() << ": bound " << bound << " s above the simulated step " << st.step_time
            << " s (" << r.knobs.describe() << ")";
        Config roomy = cfg;
        roomy.training.memory_budget = int64_t{1} << 50;
        seen.forced += bound > step_lower_bound(g, roomy, share);
        seen.tightest = std::max(seen.tightest, bound / st.step_time);
        tally(r.plan, l, rank_costs, seen);
      } catch (const ConfigError&) {
        // over budget or not runnable: nothing to bound
      }
    }
  }
}

TEST(StepBound, NeverAboveTheSimulatedStep) {
  Seen seen;
  int round = 0;
  for (const auto& [devices, per_node] : {std::pair<int64_t, int64_t>{4, 4}, {8, 4}})
    for (const int64_t budget_gib : {1, 2, 3, 4, 5, 6, 8, 0}) {
      Config cfg = bound_cluster(devices, per_node);
      cfg.training.memory_budget = int64_t{budget_gib} << 30;
      const auto batch = long_tail(1000 + static_cast<uint64_t>(round), 12, 16384);
      expect_bound_below_every_plan(cfg, batch, round % 2 == 1, seen);
      ++round;
    }
  // What the plans covered: the bound held on each kind of plan the search ranks.
  const std::string what = fmt::format(
      "{} plans: split {}, hybrid {}, packed {}, recompute {}, several pipelines {}, vpp>1 {}, "
      "dp>1 {}, ulysses>1 {}, per-rank costs {}, recompute forced by the budget {}; bound / step "
      "at most {:.3f}",
      seen.plans, seen.split, seen.hybrid, seen.packed, seen.recompute, seen.pipelines, seen.vpp,
      seen.dp, seen.ulysses, seen.rank_costs, seen.forced, seen.tightest);
  for (int n : {seen.split, seen.hybrid, seen.packed, seen.recompute, seen.pipelines, seen.vpp,
                seen.dp, seen.ulysses, seen.rank_costs, seen.forced})
    EXPECT_GT(n, 0) << what;
  EXPECT_GT(seen.tightest, 0.8) << what;  // a bound that prunes, not a vacuous one
  std::printf("%s\n", what.c_str());
}

// The bound is a bound of the cost model, not a guess: a chunk of every sequence whole on one
// stage of every layer is exactly its forward + backward (one rank, one chunk, nothing else).
TEST(StepBound, OneRankOneChunkIsExactlyItsActions) {
  const Config cfg = bound_cluster(1, 1);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> lengths = {3000, 500, 20000};  // 20000 is cut to seq_length
  std::vector<cost::SliceShape> whole = {{0, 3000, true}, {0, 500, true}, {0, 16384, true}};
  const cost::StageShape all{cfg.model.num_layers, true, true, -1};
  EXPECT_DOUBLE_EQ(step_lower_bound(cm, cfg, lengths),
                   cm.forward_time(whole, all) + cm.backward_time(whole, all));
  Config two = cfg;
  two.parallel.pipeline_parallel = 2;
  EXPECT_EQ(step_lower_bound(cm, two, {}), 0.0);
  // Slower coefficients on one rank never raise it; faster ones lower it.
  std::vector<cost::Coefficients> per(2, cm.coefficients());
  per[1].alpha2 *= 2;
  EXPECT_DOUBLE_EQ(step_lower_bound(cm.with_rank_coefficients(per), two, lengths),
                   step_lower_bound(cm, two, lengths));
  per[1].alpha2 = cm.coefficients().alpha2 / 2;
  EXPECT_LT(step_lower_bound(cm.with_rank_coefficients(per), two, lengths),
            step_lower_bound(cm, two, lengths));
  // A budget the longest sequence's activations do not fit forces recompute: a higher bound.
  Config tight = cfg;
  tight.training.memory_budget = int64_t{1} << 30;
  EXPECT_GT(step_lower_bound(cm, tight, lengths), step_lower_bound(cm, cfg, lengths));
}

}  // namespace
}  // namespace infinipipe::sim
