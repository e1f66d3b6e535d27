// The exact recompute solve's cheap lower bound (recompute_cover_bound): a bound on every answer,
// proven before the LP runs, so that a solve cut short by its time cap still reports one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "plan/recompute.h"
#include "plan/schedule.h"
#include "plan/schedule_memory.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using testing::max_of;
using testing::plan_random;
using testing::small_config;

// Recompute problems of random long-tail plans at budgets between the leanest and the fattest
// choice; each with its brute-force optimum when that is small enough to enumerate.
TEST(RecomputeBound, NeverAboveTheOptimumAndPositiveWhenRecomputeIsNeeded) {
  std::mt19937 rng(17);
  int compared = 0, positive = 0;
  for (int trial = 0; trial < 24; ++trial) {
    Config cfg = small_config(2, 1, 4);
    Plan p = plan_random(cfg, rng, 4 + trial % 3);
    schedule_build(p, Schedule::epp);
    const auto cm = cost::CostModel::from_config(cfg);
    auto pb = recompute_problem(p, cm, plan_memory_context(cfg, 0), RecomputeTie::diagonal);
    double combos = 1;
    for (int32_t u : pb.group_max) combos *= u + 1;
    if (combos > 20000) continue;
    const int64_t lean = recompute_min_budget(pb);
    const int64_t fat = max_of(recompute_peaks(pb, std::vector<int32_t>(pb.group_max.size(), 0)));
    for (double f : {0.0, 0.3, 0.7, 1.0}) {
      pb.budget = lean + static_cast<int64_t>((fat - lean) * f);
      const auto brute = recompute_solve_brute(pb);
      ASSERT_TRUE(brute.feasible);
      const double bound = recompute_cover_bound(pb);
      SCOPED_TRACE(::testing::Message() << "trial " << trial << " f " << f);
      EXPECT_LE(bound, brute.cost * (1 + 1e-9) + 1e-12);
      if (brute.cost > 0) {
        EXPECT_GT(bound, 0.0);
        positive += 1;
      } else {
        EXPECT_EQ(bound, 0.0);
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 20);
  EXPECT_GT(positive, 10);
}

TEST(RecomputeBound, InfiniteWhenNoChoiceFits) {
  std::mt19937 rng(9);
  Config cfg = small_config(2);
  Plan p = plan_random(cfg, rng, 6);
  schedule_build(p, Schedule::epp);
  const auto cm = cost::CostModel::from_config(cfg);
  auto pb = recompute_problem(p, cm, plan_memory_context(cfg, 0), RecomputeTie::diagonal);
  pb.budget = recompute_min_budget(pb) - 1;
  EXPECT_TRUE(std::isinf(recompute_cover_bound(pb)));
}

// A memory-bound plan too large to enumerate, solved with almost no time: whatever the LP and
// CBC reach, the answer carries a positive bound (never "gap 100%") that the full solve's
// answer respects.
TEST(RecomputeBound, ASolveCutShortStillReportsABound) {
  std::mt19937 rng(13);
  Config cfg = small_config(4, 1, 16);
  Plan p = plan_random(cfg, rng, 40);
  schedule_build(p, Schedule::epp);
  const auto cm = cost::CostModel::from_config(cfg);
  auto pb = recompute_problem(p, cm, plan_memory_context(cfg, 0), RecomputeTie::diagonal);
  const int64_t lean = recompute_min_budget(pb);
  const int64_t fat = max_of(recompute_peaks(pb, std::vector<int32_t>(pb.group_max.size(), 0)));
  for (double f : {0.05, 0.2, 0.5}) {
    pb.budget = lean + static_cast<int64_t>((fat - lean) * f);
    const auto quick = recompute_solve_exact(pb, 0.02, 1e-6);
    const auto full = recompute_solve_exact(pb, 0.02);
    ASSERT_TRUE(quick.feasible);
    ASSERT_TRUE(full.feasible);
    ASSERT_GT(quick.cost, 0.0);
    EXPECT_GT(quick.lower_bound, 0.0);
    EXPECT_GE(quick.lower_bound, recompute_cover_bound(pb) * (1 - 1e-12));
    EXPECT_LE(quick.lower_bound, full.cost * (1 + 1e-9));
    EXPECT_LE(full.lower_bound, quick.cost * (1 + 1e-9));
  }
}

// Problems past the brute-force shortcut of the exact solve (so its LP, the duals' Lagrangian
// bound and the covering bound all run) yet small enough to enumerate: the bound it reports,
// with its full time and with almost none, never exceeds the true optimum.
TEST(RecomputeBound, ExactSolveBoundsNeverExceedTheOptimum) {
  std::mt19937 rng(23);
  int compared = 0;
  for (int trial = 0; trial < 40 && compared < 6; ++trial) {
    Config cfg = small_config(2, 1, 6);  // 3 layers per stage
    Plan p = plan_random(cfg, rng, 5);
    schedule_build(p, Schedule::epp);
    const auto cm = cost::CostModel::from_config(cfg);
    auto pb = recompute_problem(p, cm, plan_memory_context(cfg, 0), RecomputeTie::diagonal);
    double combos = 1;
    for (int32_t u : pb.group_max) combos *= u + 1;
    if (combos <= 20000 || combos > 300000) continue;
    const int64_t lean = recompute_min_budget(pb);
    const int64_t fat = max_of(recompute_peaks(pb, std::vector<int32_t>(pb.group_max.size(), 0)));
    pb.budget = lean + (fat - lean) / 4;
    const auto brute = recompute_solve_brute(pb);
    ASSERT_TRUE(brute.feasible);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ", " << combos << " choices");
    for (double cap : {1.0, 1e-6}) {
      const auto sol = recompute_solve_exact(pb, 0.0, cap);
      ASSERT_TRUE(sol.feasible);
      EXPECT_LE(sol.lower_bound, brute.cost * (1 + 1e-9) + 1e-12);
      EXPECT_GE(sol.cost, brute.cost * (1 - 1e-9));
      if (brute.cost > 0) {
        EXPECT_GT(sol.lower_bound, 0.0);
      }
    }
    ++compared;
  }
  EXPECT_GE(compared, 3);
}

}  // namespace
}  // namespace infinipipe::plan
