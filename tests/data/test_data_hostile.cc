// Counters restored from a checkpoint are bounded, so counting on cannot overflow.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/error.h"
#include "data/batch_sampler.h"

namespace infinipipe::data {
namespace {

TEST(DataHostile, ConsumedSamplesNearInt64MaxIsRefused) {
  BatchSampler s(10, 4, 1);
  EXPECT_THROW(s.set_consumed_samples(INT64_MAX - 1), Error);
  EXPECT_THROW(s.set_consumed_samples(-1), Error);
  s.set_consumed_samples(int64_t{1} << 53);
  EXPECT_EQ(s.next().size(), 4u);
  EXPECT_EQ(s.consumed_samples(), (int64_t{1} << 53) + 4);
}

}  // namespace
}  // namespace infinipipe::data
