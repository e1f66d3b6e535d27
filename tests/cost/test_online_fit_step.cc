// The per-step cost fit: the gap per action is weighted by the actions of each step, the tail
// by steps, both forgetting older steps; bad samples and states are named errors.
#include "cost/online_fit_step.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace infinipipe::cost {
namespace {

TEST(StepCostFit, MeansWeightedByActionsAndSteps) {
  StepCostFit fit(1.0);
  EXPECT_EQ(fit.action_gap(), 0.0);
  EXPECT_EQ(fit.tail(), 0.0);
  fit.update({10, 10 * 1e-3, 0.02});
  fit.update({30, 30 * 3e-3, 0.04});
  EXPECT_DOUBLE_EQ(fit.action_gap(), (10 * 1e-3 + 30 * 3e-3) / 40);
  EXPECT_DOUBLE_EQ(fit.tail(), 0.03);
}

TEST(StepCostFit, ForgetsOlderSteps) {
  StepCostFit fit(0.5);
  fit.update({10, 10 * 1e-3, 0.1});
  fit.update({10, 10 * 3e-3, 0.3});
  EXPECT_DOUBLE_EQ(fit.tail(), (0.5 * 0.1 + 0.3) / 1.5);
  EXPECT_DOUBLE_EQ(fit.action_gap(), (0.5 * 10e-3 + 30e-3) / 15);
  // A long run of a new value: the fit follows it.
  for (int i = 0; i < 60; ++i) fit.update({10, 10 * 5e-3, 0.5});
  EXPECT_NEAR(fit.tail(), 0.5, 1e-12);
  EXPECT_NEAR(fit.action_gap(), 5e-3, 1e-15);
}

TEST(StepCostFit, StateRoundTripsAndBadInputIsAnError) {
  StepCostFit fit;
  fit.update({12, 0.012, 0.07});
  fit.update({20, 0.030, 0.05});
  StepCostFit back;
  back.restore(fit.state(), "test");
  EXPECT_EQ(back.action_gap(), fit.action_gap());
  EXPECT_EQ(back.tail(), fit.tail());
  EXPECT_THROW(StepCostFit(0.0), ConfigError);
  EXPECT_THROW(StepCostFit(1.5), ConfigError);
  EXPECT_THROW(fit.update({-1, 0, 0}), Error);
  EXPECT_THROW(fit.update({1, std::nan(""), 0}), Error);
  EXPECT_THROW(fit.update({1, 0, -0.1}), Error);
  StepCostState bad = fit.state();
  bad.weight[1] = -1;
  EXPECT_THROW(back.restore(bad, "test"), Error);
}

}  // namespace
}  // namespace infinipipe::cost
