#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_groups.h"
#include "core/error.h"
#include "mpi_test_util.h"

namespace infinipipe {
namespace {

// A deterministic pseudo-random gradient element, so every rank can compute every replica's.
float grad_value(int replica, int stage, int tensor, int64_t i, int iter, bool integral) {
  uint64_t x = (uint64_t(replica) * 1000003u) ^ (uint64_t(stage) << 40) ^ (uint64_t(tensor) << 20) ^
               uint64_t(i) ^ (uint64_t(iter) << 50);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  if (integral) return static_cast<float>(int64_t(x % 2001) - 1000);
  return static_cast<float>((double(x % 1000003) / 1000003.0 - 0.5) * 2e-3);
}

// Sizes chosen so tensors straddle bucket boundaries and one tensor spans several buckets.
const std::vector<int64_t> kSizes = {3000, 17, 40000, 12345, 1, 65536, 999};
constexpr int64_t kBucketBytes = 64 << 10;  // 16384 floats

struct Grads {
  std::vector<std::vector<float>> t;
  void fill(int replica, int stage, int iter, bool integral) {
    t.resize(kSizes.size());
    for (size_t k = 0; k < kSizes.size(); ++k) {
      t[k].resize(static_cast<size_t>(kSizes[k]));
      for (int64_t i = 0; i < kSizes[k]; ++i)
        t[k][size_t(i)] = grad_value(replica, stage, int(k), i, iter, integral);
    }
  }
};

void check_bucketed(int64_t pp, int64_t dp, GradReduceOp op, bool integral) {
  ProcessGroups g(test::test_comm(), pp, dp);
  const RankLayout& l = g.layout();
  Grads grads;
  GradBuckets buckets(g.dp_comm(), 20.0, op, kBucketBytes);
  grads.fill(l.replica, l.stage, 0, integral);
  for (size_t k = 0; k < kSizes.size(); ++k)
    buckets.add("layer." + std::to_string(k), grads.t[k].data(), kSizes[k]);
  int64_t total = 0;
  for (int64_t s : kSizes) total += s;
  EXPECT_EQ(buckets.numel(), total);
  // Tensors of 64 KiB and more alone, in place, in pieces of at most a bucket ({40000} in 3,
  // {65536} in 4); runs of smaller ones packed: {3000, 17}, {12345, 1}, {999}.
  EXPECT_EQ(buckets.num_buckets(), 10);
  for (int iter = 0; iter < 2; ++iter) {
    grads.fill(l.replica, l.stage, iter, integral);
    // A plain MPI_Allreduce of each tensor, for comparison.
    Grads plain = grads;
    for (size_t k = 0; k < kSizes.size(); ++k)
      MPI_Allreduce(MPI_IN_PLACE, plain.t[k].data(), int(kSizes[k]), MPI_FLOAT, MPI_SUM,
                    g.dp_comm());
    // Backward makes gradients final in registration order; the last two are left to finish().
    for (size_t k = 0; k + 2 < kSizes.size(); ++k) {
      buckets.mark_ready(int(k));
      buckets.progress();
    }
    buckets.finish("the all-reduce test");
    if (dp > 1) {
      EXPECT_GT(buckets.last_started_early(), 0);
      EXPECT_LT(buckets.last_started_early(), buckets.num_buckets());
    }
    const double scale = op == GradReduceOp::average ? 1.0 / double(dp) : 1.0;
    for (size_t k = 0; k < kSizes.size(); ++k) {
      for (int64_t i = 0; i < kSizes[k]; ++i) {
        double seq = 0;
        for (int r = 0; r < dp; ++r) seq += grad_value(r, l.stage, int(k), i, iter, integral);
        seq *= scale;
        float got = grads.t[k][size_t(i)];
        float pl = plain.t[k][size_t(i)] * float(scale);
        if (integral && op == GradReduceOp::sum) {
          ASSERT_EQ(got, float(seq)) << "tensor " << k << " element " << i;
          ASSERT_EQ(got, pl);
        } else {
          ASSERT_NEAR(got, seq, 1e-6 * dp + 1e-6 * std::abs(seq)) << "tensor " << k << " i " << i;
          ASSERT_NEAR(got, pl, 1e-6 * dp + 1e-6 * std::abs(pl));
        }
      }
    }
    // Replicas must end bit-identical, or their weights drift apart.
    uint64_t h = 1469598103934665603ULL;
    for (const auto& t : grads.t)
      for (float v : t) {
        uint32_t b;
        std::memcpy(&b, &v, 4);
        h = (h ^ b) * 1099511628211ULL;
      }
    std::vector<uint64_t> all(static_cast<size_t>(dp));
    MPI_Allgather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, g.dp_comm());
    for (uint64_t o : all) EXPECT_EQ(o, h) << "replicas of stage " << l.stage << " differ";
  }
}

TEST(MpiAllReduce, BucketsEqualPlainAllreduceAndSequentialSum) {
  MPI_TEST_RANKS(4);
  {
    SCOPED_TRACE("pp 1 x dp 4, random gradients");
    check_bucketed(1, 4, GradReduceOp::sum, false);
  }
  {
    SCOPED_TRACE("pp 2 x dp 2, integral gradients: exact");
    check_bucketed(2, 2, GradReduceOp::sum, true);
  }
  {
    SCOPED_TRACE("pp 4 x dp 1: nothing to reduce");
    check_bucketed(4, 1, GradReduceOp::sum, false);
  }
}

TEST(MpiAllReduce, AverageAndScalarReductions) {
  MPI_TEST_RANKS(4);
  check_bucketed(1, 4, GradReduceOp::average, false);
  ProcessGroups g(test::test_comm(), 2, 2);
  const RankLayout& l = g.layout();
  // Loss sum and token count of this rank's share: the global mean is sum / tokens.
  double loss = 1.5 * (l.rank + 1);
  int64_t tokens = 100 + l.rank;
  EXPECT_DOUBLE_EQ(allreduce_sum(g.dp_comm(), loss, 5.0, "loss"),
                   1.5 * (l.rank_of(l.stage, 0) + 1 + l.rank_of(l.stage, 1) + 1));
  EXPECT_EQ(allreduce_sum(g.pp_comm(), tokens, 5.0, "tokens"),
            200 + l.rank_of(0, l.replica) + l.rank_of(1, l.replica));
  EXPECT_EQ(allreduce_sum(g.world(), tokens, 5.0, "tokens"), 406);
  std::vector<double> v = {double(l.rank), -double(l.rank)};
  allreduce_max(g.world(), v, 5.0, "peaks");
  EXPECT_EQ(v[0], 3.0);
  EXPECT_EQ(v[1], 0.0);
}

}  // namespace
}  // namespace infinipipe
