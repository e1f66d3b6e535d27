#include "data/batch_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace infinipipe::data {
namespace {

std::vector<std::vector<int64_t>> take(BatchSampler& s, int n) {
  std::vector<std::vector<int64_t>> out;
  for (int i = 0; i < n; ++i) out.push_back(s.next());
  return out;
}

TEST(BatchSampler, SameSeedSameOrder) {
  BatchSampler a(100, 16, 42), b(100, 16, 42), c(100, 16, 43);
  const auto ba = take(a, 20);
  EXPECT_EQ(ba, take(b, 20));
  EXPECT_NE(ba, take(c, 20));
}

TEST(BatchSampler, EachEpochIsAFreshPermutation) {
  const int64_t n = 50;
  BatchSampler s(n, 10, 7);
  std::vector<int64_t> all;
  for (int i = 0; i < 10; ++i) {  // two epochs
    const auto batch = s.next();
    ASSERT_EQ(batch.size(), 10u);
    all.insert(all.end(), batch.begin(), batch.end());
  }
  EXPECT_EQ(s.consumed_samples(), 100);
  EXPECT_EQ(s.epoch(), 2);
  std::vector<int64_t> e0(all.begin(), all.begin() + n), e1(all.begin() + n, all.end());
  EXPECT_EQ(e0, s.epoch_order(0));
  EXPECT_EQ(e1, s.epoch_order(1));
  EXPECT_NE(e0, e1);
  std::vector<int64_t> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(e0, identity);  // shuffled at all
  std::sort(e0.begin(), e0.end());
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e0, identity);
  EXPECT_EQ(e1, identity);
}

TEST(BatchSampler, BatchesCrossEpochBoundaries) {
  BatchSampler s(7, 5, 1);
  const auto b0 = s.next(), b1 = s.next();
  const auto e0 = s.epoch_order(0), e1 = s.epoch_order(1);
  EXPECT_EQ(b0, std::vector<int64_t>(e0.begin(), e0.begin() + 5));
  EXPECT_EQ(b1, (std::vector<int64_t>{e0[5], e0[6], e1[0], e1[1], e1[2]}));
  // A batch larger than the dataset spans several epochs.
  BatchSampler big(3, 10, 1);
  EXPECT_EQ(big.next().size(), 10u);
  EXPECT_EQ(big.epoch(), 3);
}

TEST(BatchSampler, ResumeFromConsumedSamplesIsExact) {
  BatchSampler straight(37, 8, 99);
  const auto expected = take(straight, 30);
  for (const int done : {0, 1, 4, 5, 29}) {
    BatchSampler resumed(37, 8, 99);
    resumed.set_consumed_samples(done * 8);
    for (int i = done; i < 30; ++i) EXPECT_EQ(resumed.next(), expected[i]) << "resume at " << done;
    EXPECT_EQ(resumed.consumed_samples(), straight.consumed_samples());
  }
  // Rewinding an in-use sampler works too.
  straight.set_consumed_samples(3 * 8);
  EXPECT_EQ(straight.next(), expected[3]);
}

TEST(BatchSampler, BadArguments) {
  EXPECT_THROW(BatchSampler(10, 0, 1), ConfigError);
  EXPECT_THROW(BatchSampler(0, 4, 1), Error);
  BatchSampler s(10, 4, 1);
  EXPECT_THROW(s.set_consumed_samples(-1), Error);
}

}  // namespace
}  // namespace infinipipe::data
