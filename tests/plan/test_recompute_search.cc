// The recompute search (recompute_search.h) against enumeration: a problem is called hopeless
// only where no choice fits, and points no choice puts over budget change nothing in the greedy
// repair.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "plan/recompute.h"
#include "plan/recompute_search.h"
#include "recompute_random_items.h"

namespace infinipipe::plan {
namespace {

// Items whose held bytes fall with r and whose backward transient may rise past them (the
// working set of a recomputed layer), so a point's least value is not always at the most
// recompute. Points hold random terms, some the same item's held and transient both.
RecomputeProblem random_search_problem(std::mt19937& rng, int groups, int items, int points) {
  RecomputeProblem pb;
  testing::random_recompute_items(rng, pb, groups, items, true);
  std::uniform_int_distribution<int64_t> bytes(10, 100);
  std::uniform_int_distribution<int> pick_item(0, items - 1), kind(0, 2);
  for (int p = 0; p < points; ++p) {
    RecomputePoint pt;
    pt.rank = p % 2;
    pt.fixed = bytes(rng);
    for (int k = 0; k < 3; ++k) {
      const int item = pick_item(rng), how = kind(rng);
      pt.terms.push_back({item, how == 1, how == 2});
      if (how == 1) pt.terms.push_back({item, false});
    }
    pb.points.push_back(std::move(pt));
  }
  return pb;
}

// Every choice of levels, in order.
template <class Visit>
void for_each_choice(const RecomputeProblem& pb, const Visit& visit) {
  std::vector<int32_t> x(pb.group_max.size(), 0);
  for (;;) {
    visit(x);
    size_t g = 0;
    while (g < x.size() && x[g] == pb.group_max[g]) x[g++] = 0;
    if (g == x.size()) return;
    ++x[g];
  }
}

int64_t point_value(const RecomputeProblem& pb, const RecomputePoint& pt,
                    const std::vector<int32_t>& x) {
  int64_t v = pt.fixed;
  for (const RecomputeTerm& t : pt.terms) {
    const RecomputeItem& it = pb.items[t.item];
    v += recompute_term_value(it, t.transient, t.forward, x[it.group]);
  }
  return v;
}

int64_t max_peak(const RecomputeProblem& pb, const std::vector<int32_t>& x) {
  const std::vector<int64_t> peaks = recompute_peaks(pb, x);
  return *std::max_element(peaks.begin(), peaks.end());
}

TEST(RecomputeSearch, NeverFitsOnlyWhereNoChoiceFits) {
  std::mt19937 rng(5);
  int hopeless = 0, least_below_the_maximum = 0;
  for (int trial = 0; trial < 300; ++trial) {
    RecomputeProblem pb = random_search_problem(rng, 4, 6, 6);
    const int64_t lean = recompute_min_budget(pb);
    pb.budget = lean + std::uniform_int_distribution<int64_t>(-60, 60)(rng);
    // Some point over budget at every choice, by enumeration.
    bool no_choice = false;
    for (const RecomputePoint& pt : pb.points) {
      bool fits_somewhere = false;
      for_each_choice(pb, [&](const std::vector<int32_t>& x) {
        fits_somewhere = fits_somewhere || point_value(pb, pt, x) <= pb.budget;
      });
      no_choice = no_choice || !fits_somewhere;
    }
    EXPECT_EQ(recompute_never_fits(pb), no_choice) << "trial " << trial;
    if (no_choice) {
      ++hopeless;
      EXPECT_FALSE(recompute_solve_brute(pb).feasible);
    } else if (lean > pb.budget) {
      ++least_below_the_maximum;  // over budget at the maximum, yet not hopeless
    }
    const RecomputeSolution greedy = recompute_solve_greedy(pb);
    if (greedy.feasible) {
      EXPECT_LE(max_peak(pb, greedy.layers), pb.budget);
    }
    if (no_choice) {
      EXPECT_FALSE(greedy.feasible);
    }
  }
  EXPECT_GT(hopeless, 10);
  EXPECT_GT(least_below_the_maximum, 10);
}

// The repair on a problem equals the repair on the same problem without the points no choice
// puts over budget (found by enumeration), and its answer fits every point.
TEST(RecomputeSearch, PointsNoChoicePutsOverBudgetChangeNothingInTheRepair) {
  std::mt19937 rng(7);
  int dropped_some = 0, repaired = 0;
  for (int trial = 0; trial < 300; ++trial) {
    RecomputeProblem pb = random_search_problem(rng, 4, 6, 10);
    const int64_t lean = recompute_min_budget(pb);
    const int64_t fat = max_peak(pb, std::vector<int32_t>(pb.group_max.size(), 0));
    pb.budget = std::min(lean, fat) +
                std::abs(fat - lean) * std::uniform_int_distribution<int>(0, 100)(rng) / 100;
    RecomputeProblem binding = pb;
    binding.points.clear();
    const RecomputeIndex ix = recompute_index(pb);
    for (int32_t p = 0; p < static_cast<int32_t>(pb.points.size()); ++p) {
      const RecomputePoint& pt = pb.points[p];
      bool ever_over = false;
      for_each_choice(pb, [&](const std::vector<int32_t>& x) {
        ever_over = ever_over || point_value(pb, pt, x) > pb.budget;
      });
      if (ever_over) binding.points.push_back(pt);
    }
    dropped_some += binding.points.size() < pb.points.size();
    std::vector<int32_t> x(pb.group_max.size(), 0), y = x;
    const bool ok = recompute_repair(pb, ix, x);
    EXPECT_EQ(recompute_repair(binding, recompute_index(binding), y), ok) << "trial " << trial;
    EXPECT_EQ(x, y) << "trial " << trial;
    if (!ok) continue;
    ++repaired;
    for (const RecomputePoint& pt : pb.points) EXPECT_LE(point_value(pb, pt, x), pb.budget);
    // The local search from there keeps every point within budget and never costs more.
    std::vector<int32_t> z = x;
    recompute_improve(pb, recompute_index(pb), z, thread_cpu_seconds() + 10.0);
    for (const RecomputePoint& pt : pb.points) EXPECT_LE(point_value(pb, pt, z), pb.budget);
    EXPECT_LE(recompute_cost(pb, z), recompute_cost(pb, x) + 1e-12);
  }
  EXPECT_GT(dropped_some, 50);
  EXPECT_GT(repaired, 50);
}

}  // namespace
}  // namespace infinipipe::plan
