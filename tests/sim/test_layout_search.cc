// The layout search against an exhaustive enumeration planned here directly, its determinism
// across thread counts, each EPP layout ranked on its own vpp, and every infeasible reason on
// constructed cases.
#include "sim/layout_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/small_layout_model.h"
#include "core/error.h"
#include "plan/budget_error.h"
#include "plan/planner.h"
#include "plan/schedule_table.h"
#include "sim/layout_search_report.h"
#include "sim/simulator.h"

namespace infinipipe::sim {
namespace {

Config small_model(int64_t devices, int64_t per_node) {
  return testing::small_layout_model(devices, per_node, 16);
}

// Long-tail lengths from a fixed linear congruential stream: a few long, most short.
std::vector<std::vector<int64_t>> long_tail_batches(int64_t count, int64_t gbs, int64_t longest) {
  uint64_t x = 12345;
  std::vector<std::vector<int64_t>> out;
  for (int64_t b = 0; b < count; ++b) {
    std::vector<int64_t> batch;
    for (int64_t i = 0; i < gbs; ++i) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      const double u = static_cast<double>(x >> 11) / 9007199254740992.0;
      batch.push_back(std::max<int64_t>(64, static_cast<int64_t>(longest * u * u * u * u)));
    }
    out.push_back(batch);
  }
  return out;
}

LayoutSpace space_of(const Config& cfg, int threads = 2) {
  LayoutSpace s;
  s.num_devices = cfg.cluster.num_devices;
  s.devices_per_node = cfg.cluster.devices_per_node;
  s.threads = threads;
  return s;
}

// Tokens/s of one layout planned directly (nullopt when it cannot run): every replica's share of
// every batch planned and simulated, a batch taking its slowest replica's step.
std::optional<double> planned_tokens_per_s(const Config& base, const Layout& l,
                                           const std::vector<std::vector<int64_t>>& batches) {
  Config cfg = base;
  cfg.parallel.pipeline_parallel = l.pp;
  cfg.parallel.virtual_stages = l.vpp;
  cfg.parallel.ulysses_degree = l.ulysses;
  cfg.parallel.data_parallel = l.dp;
  cfg.parallel.schedule = l.schedule;
  cfg.parallel.epp_exact_vpp = true;  // a layout's vpp, as the search ranks it
  try {
    cfg.validate();
    plan::schedule_check_layout(cfg.parallel);
  } catch (const ConfigError&) {
    return std::nullopt;
  }
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  double time = 0;
  int64_t tokens = 0;
  for (const auto& batch : batches) {
    double step = 0;
    for (const auto& share : plan::balance_replicas(batch, l.dp, cm, cfg)) {
      try {
        const plan::PlanResult r = plan::make_plan_detailed(cfg, cm, share, l.schedule);
        const StepResult st = simulate(r.plan, cm, cfg);
        if (st.oom) return std::nullopt;
        step = std::max(step, st.step_time);
      } catch (const ConfigError&) {
        return std::nullopt;
      }
    }
    time += step;
    for (int64_t len : batch) tokens += len;
  }
  return static_cast<double>(tokens) / time;
}

const LayoutResult& find(const LayoutSearchResult& r, const Layout& l) {
  for (const LayoutResult& x : r.ranked)
    if (x.layout == l) return x;
  ADD_FAILURE() << "no result for " << l.describe();
  return r.ranked.front();
}

void expect_search_is_the_exhaustive_best(int64_t devices, int64_t per_node) {
  Config cfg = small_model(devices, per_node);
  cfg.training.memory_budget = int64_t{6} << 30;  // the longest sequences bind at small pp
  const auto batches = long_tail_batches(2, cfg.training.global_batch_size, 16384);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  LayoutSpace all = space_of(cfg);
  all.exhaustive = true;
  const LayoutSearchResult r = layout_search(cfg, cm, all, batches);
  const LayoutSearchResult pruned = layout_search(cfg, cm, space_of(cfg), batches);

  // Every (ulysses inside a node, pp, dp, schedule, vpp) of the cluster, enumerated here.
  std::optional<Layout> best;
  double best_tps = 0;
  int feasible = 0;
  for (int64_t u = 1; u <= per_node; ++u) {
    if (per_node % u != 0 || devices % u != 0) continue;
    for (int64_t pp = 1; pp <= devices / u; ++pp) {
      if ((devices / u) % pp != 0) continue;
      for (const plan::ScheduleRow& row : plan::schedule_table())
        for (int64_t vpp = 1; vpp <= cfg.model.num_layers; ++vpp) {
          const Layout l{pp, vpp, u, devices / u / pp, row.id};
          const std::optional<double> tps = planned_tokens_per_s(cfg, l, batches);
          if (!tps) continue;
          ++feasible;
          if (!best || *tps > best_tps) {
            best = l;
            best_tps = *tps;
          }
        }
    }
  }
  ASSERT_TRUE(best.has_value());
  ASSERT_NE(r.best(), nullptr);
  EXPECT_EQ(r.best()->layout, *best) << r.best()->layout.describe() << " vs " << best->describe();
  EXPECT_DOUBLE_EQ(r.best()->tokens_per_s, best_tps);
  ASSERT_NE(pruned.best(), nullptr);
  EXPECT_EQ(pruned.best()->layout, *best);
  EXPECT_DOUBLE_EQ(pruned.best()->tokens_per_s, best_tps);
  int search_feasible = 0;
  for (const LayoutResult& x : r.ranked) search_feasible += x.feasible;
  EXPECT_EQ(search_feasible, feasible);
  // Ranked best first.
  for (size_t i = 1; i < r.ranked.size(); ++i) {
    if (r.ranked[i].feasible) {
      EXPECT_GE(r.ranked[i - 1].tokens_per_s, r.ranked[i].tokens_per_s);
    }
  }
}

// The pruned search against the exhaustive one on many small clusters, budgets and batches:
// the same best; every layout it planned has the exhaustive result; every one it skipped is
// slower than the best (or cannot run); no layout beats its bound; the same bytes on 1 and 3
// threads.
TEST(LayoutSearch, PrunedSearchKeepsTheExhaustiveBest) {
  int skipped = 0, searches = 0;
  for (const auto& [devices, per_node] :
       {std::pair<int64_t, int64_t>{4, 4}, {8, 8}, {8, 4}, {16, 8}})
    for (const int64_t budget_gib : {4, 8, 0})
      for (const int64_t longest : {4096, 16384}) {
        Config cfg = small_model(devices, per_node);
        cfg.training.memory_budget = budget_gib << 30;
        const auto batches = long_tail_batches(1 + searches % 2, 16, longest);
        const cost::CostModel cm = cost::CostModel::from_config(cfg);
        LayoutSpace all = space_of(cfg);
        all.exhaustive = true;
        const LayoutSearchResult full = layout_search(cfg, cm, all, batches);
        const LayoutSearchResult pruned = layout_search(cfg, cm, space_of(cfg, 1), batches);
        const std::string where = fmt::format("{} devices ({} per node), budget {} GiB, {} long",
                                              devices, per_node, budget_gib, longest);
        ++searches;
        ASSERT_NE(full.best(), nullptr) << where;
        ASSERT_NE(pruned.best(), nullptr) << where;
        EXPECT_EQ(pruned.best()->layout, full.best()->layout) << where;
        EXPECT_EQ(pruned.best()->tokens_per_s, full.best()->tokens_per_s) << where;
        EXPECT_EQ(
            layout_search_json(pruned, space_of(cfg)).dump(),
            layout_search_json(layout_search(cfg, cm, space_of(cfg, 3), batches), space_of(cfg))
                .dump())
            << where;
        for (const LayoutResult& x : full.ranked) {
          EXPECT_TRUE(x.evaluated);
          if (x.feasible) {
            EXPECT_LE(x.tokens_per_s, x.bound_tokens_per_s) << where << " " << x.layout.describe();
          }
        }
        for (const LayoutResult& x : pruned.ranked) {
          const LayoutResult& e = find(full, x.layout);
          EXPECT_EQ(x.bound_tokens_per_s, e.bound_tokens_per_s);
          if (x.evaluated) {
            EXPECT_EQ(x.feasible, e.feasible) << where << " " << x.layout.describe();
            EXPECT_EQ(x.tokens_per_s, e.tokens_per_s) << where << " " << x.layout.describe();
            EXPECT_EQ(x.reason, e.reason) << where << " " << x.layout.describe();
            continue;
          }
          ++skipped;
          EXPECT_FALSE(x.feasible);
          EXPECT_LT(x.stop_bound_tokens_per_s, pruned.best()->tokens_per_s) << where;
          EXPECT_LE(x.stop_bound_tokens_per_s, x.bound_tokens_per_s) << where;
          if (e.feasible) {
            EXPECT_LE(e.tokens_per_s, x.stop_bound_tokens_per_s) << where;
          }
          if (e.feasible) {
            EXPECT_LT(e.tokens_per_s, pruned.best()->tokens_per_s) << where;
          }
          // Its bound before planning, or after planning its slowest replicas first.
          EXPECT_EQ(x.reason.rfind("not evaluated: at most ", 0), 0u) << x.reason;
          const std::string tail =
              fmt::format("below the best {:.0f}", pruned.best()->tokens_per_s);
          EXPECT_EQ(x.reason.substr(x.reason.size() - tail.size()), tail) << x.reason;
        }
      }
  EXPECT_GT(skipped, 0);  // the bound prunes at all
  std::printf("%d searches, %d layouts skipped\n", searches, skipped);
}

TEST(LayoutSearch, BestOfTheExhaustiveEnumerationOnEightDevices) {
  expect_search_is_the_exhaustive_best(8, 8);
}

TEST(LayoutSearch, BestOfTheExhaustiveEnumerationOnSixteenDevicesInTwoNodes) {
  expect_search_is_the_exhaustive_best(16, 8);
}

TEST(LayoutSearch, RankingIsTheSameBytesWhateverTheThreads) {
  Config cfg = small_model(8, 4);
  cfg.training.memory_budget = int64_t{6} << 30;
  const auto batches = long_tail_batches(2, cfg.training.global_batch_size, 16384);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const LayoutSearchResult one = layout_search(cfg, cm, space_of(cfg, 1), batches);
  const LayoutSearchResult four = layout_search(cfg, cm, space_of(cfg, 4), batches);
  const LayoutSearchResult again = layout_search(cfg, cm, space_of(cfg, 4), batches);
  const std::string text = layout_search_markdown(one, space_of(cfg));
  EXPECT_EQ(text, layout_search_markdown(four, space_of(cfg)));
  EXPECT_EQ(text, layout_search_markdown(again, space_of(cfg)));
  EXPECT_EQ(layout_search_json(one, space_of(cfg)).dump(),
            layout_search_json(four, space_of(cfg)).dump());
  EXPECT_NE(text.find("| 1 |"), std::string::npos);  // a ranked row
}

TEST(LayoutSearch, EveryInfeasibleReasonIsRight) {
  // 6 layers, 6 heads, 8 devices of 4 per node, a global batch of 2 sequences.
  Config cfg = small_model(8, 4);
  cfg.model.num_layers = 6;
  cfg.model.hidden_size = 768;
  cfg.model.num_attention_heads = 6;
  cfg.training.global_batch_size = 2;
  const std::vector<std::vector<int64_t>> batches = {{4096, 1024}};
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  LayoutSpace every = space_of(cfg);
  every.exhaustive = true;  // every layout planned: each says why it cannot run
  const LayoutSearchResult r = layout_search(cfg, cm, every, batches);

  EXPECT_EQ(find(r, {1, 1, 4, 2, Schedule::epp}).reason,
            "ulysses 4 does not divide the 6 attention heads and 6 query groups (heads are "
            "scattered over the sequence-parallel group)");
  EXPECT_EQ(find(r, {8, 1, 1, 1, Schedule::gpipe}).reason,
            "num-layers 6 is fewer than the pp 8 x vpp 1 = 8 stages");
  EXPECT_EQ(find(r, {4, 0, 1, 2, Schedule::interleaved}).reason,
            "num-layers 6 is not divisible by pp 4 x vpp for any vpp >= 2 (interleaved needs "
            "equal virtual stages)");
  EXPECT_EQ(find(r, {1, 1, 1, 8, Schedule::epp}).reason,
            "global batch of 2 sequences is smaller than dp 8: every replica needs one");
  // Interleaved at pp 2 runs 3 virtual stages of one layer each, but a replica's one sequence
  // is one micro-batch: the planner's reason, named as the schedule's.
  EXPECT_EQ(find(r, {2, 3, 2, 2, Schedule::interleaved}).reason,
            "interleaved cannot run it: no setting of the interleaved schedule can run this batch: "
            "the interleaved schedule needs at least pp = 2 micro-batches, the batch has 1: use "
            "smaller micro-batches or --schedule 1f1b (batch 0, replica 0)");
  EXPECT_TRUE(find(r, {2, 1, 2, 2, Schedule::epp}).feasible);  // EPP slices the sequence
  for (const LayoutResult& x : r.ranked) EXPECT_EQ(x.feasible, x.reason.empty()) << x.reason;

  // A budget below what the layout needs: over by exactly the planner's least budget minus it.
  cfg.training.memory_budget = int64_t{1} << 30;
  const std::vector<std::vector<int64_t>> long_batch = {{16384, 16384}};
  LayoutSpace single = every;
  single.pp = 2;
  single.ulysses = 2;
  const LayoutSearchResult tight = layout_search(cfg, cm, single, long_batch);
  const LayoutResult& x = find(tight, {2, 1, 2, 2, Schedule::one_f_one_b});
  Config at = layout_config(cfg, single, x.layout);
  at.validate();
  const cost::CostModel g = cm.with_ulysses_degree(2, 0);
  const auto shares = plan::balance_replicas(long_batch[0], 2, g, at);
  try {
    plan::make_plan_detailed(at, g, shares[0], Schedule::one_f_one_b);
    ADD_FAILURE() << "1f1b fits 16K sequences in 1 GiB";
  } catch (const plan::BudgetError& e) {
    EXPECT_EQ(x.reason,
              fmt::format("over budget by {}: needs {} per device, budget {} (batch 0, "
                          "replica 0)",
                          format_bytes(e.least_budget() - (int64_t{1} << 30)),
                          format_bytes(e.least_budget()), format_bytes(int64_t{1} << 30)));
  }
}

// Each EPP layout is ranked on its own vpp (train runs that one): the first batch's setting says
// the layout's vpp, never a smaller one that a search over v <= vpp would have kept.
TEST(LayoutSearch, EppLayoutsAreRankedOnTheirOwnVpp) {
  Config cfg = small_model(8, 4);
  cfg.training.memory_budget = int64_t{6} << 30;
  const auto batches = long_tail_batches(1, cfg.training.global_batch_size, 16384);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  LayoutSpace s = space_of(cfg);
  s.schedules = {Schedule::epp};
  const LayoutSearchResult r = layout_search(cfg, cm, s, batches);
  int with_vpp = 0;
  for (const LayoutResult& x : r.ranked) {
    if (!x.feasible) continue;
    const bool says_vpp = x.setting.find("vpp=") != std::string::npos;
    EXPECT_EQ(says_vpp, x.layout.vpp > 1) << x.layout.describe() << ": " << x.setting;
    if (x.layout.vpp > 1) {
      EXPECT_NE(x.setting.find(fmt::format("vpp={}", x.layout.vpp)), std::string::npos)
          << x.layout.describe() << ": " << x.setting;
      ++with_vpp;
    }
  }
  EXPECT_GT(with_vpp, 0);
}

TEST(LayoutSearch, FixedDegreesAndBadInputAreClearErrors) {
  Config cfg = small_model(8, 8);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  LayoutSpace s = space_of(cfg);
  s.pp = 2;
  s.dp = 2;
  s.schedules = {Schedule::epp};
  for (const Layout& l : layout_candidates(cfg, s)) {
    EXPECT_EQ(l.pp, 2);
    EXPECT_EQ(l.dp, 2);
    EXPECT_EQ(l.ulysses, 2);
    EXPECT_EQ(l.schedule, Schedule::epp);
  }
  s.dp = 3;
  EXPECT_THROW(layout_candidates(cfg, s), ConfigError);
  EXPECT_THROW(layout_search(cfg, cm, space_of(cfg), {}), ConfigError);
}

}  // namespace
}  // namespace infinipipe::sim
