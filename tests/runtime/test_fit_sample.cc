// What the online fit learns from a measured action: its interval where the rank has a core of
// its own, the CPU time its one thread computed where ranks share the node's cores.
#include <gtest/gtest.h>

#include "runtime/fit_sample.h"

namespace infinipipe::runtime {
namespace {

TEST(FitSample, SharedCoresLearnTheCpuTimeOwnCoresTheInterval) {
  obs::ActionTiming t;
  t.start_s = 1.0;
  t.end_s = 3.0;
  t.cpu_s = 1.1;
  const cost::RankHost own{0, 2, 2}, shared{0, 2, 4};
  EXPECT_DOUBLE_EQ(action_fit_seconds(t, nullptr, 1), 2.0);
  EXPECT_DOUBLE_EQ(action_fit_seconds(t, &own, 1), 2.0);
  EXPECT_DOUBLE_EQ(action_fit_seconds(t, &shared, 1), 1.1);
  // More OpenMP threads: the main thread's CPU time is not the action's.
  EXPECT_DOUBLE_EQ(action_fit_seconds(t, &shared, 2), 2.0);
  // Not measured, or above the interval (clock granularity): the interval.
  t.cpu_s = -1;
  EXPECT_DOUBLE_EQ(action_fit_seconds(t, &shared, 1), 2.0);
  t.cpu_s = 2.5;
  EXPECT_DOUBLE_EQ(action_fit_seconds(t, &shared, 1), 2.0);
}

}  // namespace
}  // namespace infinipipe::runtime
