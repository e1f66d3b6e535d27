// Length shift: batches beyond the lengths the fit has seen are noticed once, and widening the
// fit lets the new shapes move its terms as quickly as its first samples did.
#include "cost/length_shift.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "cost/fit_test_model.h"
#include "cost/online_fit.h"

namespace infinipipe::cost {
namespace {

TEST(LengthShift, PercentileIsTheNearestRank) {
  EXPECT_EQ(length_p90(std::vector<int64_t>{}), 0);
  EXPECT_EQ(length_p90(std::vector<int64_t>{5}), 5);
  EXPECT_EQ(length_p90(std::vector<int64_t>{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}), 9);
  EXPECT_EQ(length_p90(std::vector<int64_t>{100, 1, 1, 1}), 100);
}

TEST(LengthShift, BatchesBeyondTheSeenRangeAreNoticedOnce) {
  LengthShiftDetector d(0.15);
  const std::vector<int64_t> base{100, 200, 300, 400, 500, 600, 700, 800, 900, 1000};
  EXPECT_FALSE(d.observe(base)) << "the first batch starts the range";
  std::vector<int64_t> longer = base;
  longer.back() = 1100;  // 10% beyond: within the tolerance
  EXPECT_FALSE(d.observe(longer));
  longer.back() = 1300;  // 18% beyond the 1100 now seen
  const auto note = d.observe(longer);
  ASSERT_TRUE(note);
  EXPECT_NE(note->find("longest 1300 vs 1100"), std::string::npos) << *note;
  EXPECT_FALSE(d.observe(longer)) << "the range now holds the batch: said once";
  // The longest stays, the bulk moves: the 90th percentile alone is a shift too.
  std::vector<int64_t> bulk(10, 1200);
  EXPECT_TRUE(d.observe(bulk));
  EXPECT_EQ(d.seen().max, 1300);
  EXPECT_EQ(d.seen().p90, 1200);
  EXPECT_THROW(d.restore({100, 200}), Error);
  EXPECT_THROW(LengthShiftDetector(0.0), ConfigError);
}

// Forwards of one sequence of `len` tokens on a middle stage, timed by `truth`.
ActionSample forward_of(const CostModel& truth, int64_t len) {
  ActionSample s;
  s.chunk = {{0, len, true}};
  s.stage = {4, false, false, -1};
  s.seconds = truth.forward_time(s.chunk, s.stage);
  return s;
}

TEST(LengthShift, WidenedFitFollowsNewShapesFaster) {
  const CostModel cm = fit_test_prior(16384);
  // The machine's attention is 3x the prior's: short sequences barely show it, long ones do.
  Coefficients c = cm.coefficients();
  c.alpha1 *= 3.0;
  const CostModel truth(cm.model(), cm.device(), c, 1, false);
  OnlineFit held(cm);
  for (int i = 0; i < 300; ++i) held.update(forward_of(truth, 128 + (i % 4) * 32));
  OnlineFit widened = held;
  widened.widen();
  const OnlineFitState w = widened.state();
  EXPECT_EQ(w.cov, OnlineFit(cm).state().cov) << "widening restores the prior's covariance";
  EXPECT_EQ(w.value, held.state().value) << "widening moves no term";
  for (int i = 0; i < 20; ++i) {
    held.update(forward_of(truth, 4096));
    widened.update(forward_of(truth, 4096));
  }
  const auto error = [&](const OnlineFit& f) {
    const ActionSample s = forward_of(truth, 4096);
    return std::fabs(f.predict(s) - s.seconds) / s.seconds;
  };
  EXPECT_LT(error(widened), error(held))
      << "widened " << error(widened) << ", held " << error(held);
}

}  // namespace
}  // namespace infinipipe::cost
