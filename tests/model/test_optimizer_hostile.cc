// Optimizer state restored from a checkpoint: a step count that would overflow is refused.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/error.h"
#include "model/optimizer.h"

namespace infinipipe {
namespace {

TEST(OptimizerHostile, StepCountNearInt64MaxIsRefused) {
  OptimizerOptions o;
  o.kind = Optimizer::sgd;
  ParamOptimizer opt(o);
  OptimState s;
  s.step = INT64_MAX;
  EXPECT_THROW(opt.set_state("w", 4, s), Error);
  s.step = int64_t{1} << 53;
  EXPECT_NO_THROW(opt.set_state("w", 4, s));
}

}  // namespace
}  // namespace infinipipe
