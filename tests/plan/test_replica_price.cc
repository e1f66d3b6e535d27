// The replica price: a sequence at the chunks the EPP planner runs it in (its slices, or its share
// of a packed chunk), and the order of whole replica shares it gives against the planner's own
// predicted step times, which is what the replica split relies on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/paper_llama.h"
#include "plan/planner.h"
#include "plan/replica_price.h"
#include "plan/sequence_processor.h"

namespace infinipipe::plan {
namespace {

// Llama-30B at 96K on A800s, Ulysses 8 (examples/llama30b-96k.yaml), pp 4.
Config price_config() {
  return infinipipe::testing::paper_llama(4, true);
}

double whole_cost(const cost::CostModel& cm, std::span<const cost::SliceShape> chunk) {
  return chunk_cost(cm, cost::StageShape{cm.model().num_layers, false, false}, chunk);
}

TEST(ReplicaPrice, ASlicedSequenceCostsWhatThePlannersSlicesCost) {
  const Config cfg = price_config();
  const auto cm = cost::CostModel::from_config(cfg);
  const ReplicaSplitCost price(cfg, cm);
  const cost::StageShape whole{cm.model().num_layers, false, false};
  for (int64_t len : {int64_t{20000}, int64_t{98304}})
    for (int32_t k : {2, 8, 32}) {
      const auto slices = sequence_split_balanced(0, len, k, cm, whole, 1024);
      double sum = 0;
      for (const Slice& s : slices) {
        const cost::SliceShape sh{s.offset, s.len, !s.is_split()};
        sum += whole_cost(cm, std::span<const cost::SliceShape>(&sh, 1));
      }
      const double n = static_cast<double>(slices.size());
      EXPECT_NEAR(price.marginal(len) + n * price.overhead(), sum, 1e-9 * sum)
          << len << " tokens in " << slices.size() << " slices";
    }
}

TEST(ReplicaPrice, APackedSequencePaysItsShareOfTheChunk) {
  const Config cfg = price_config();
  const auto cm = cost::CostModel::from_config(cfg);
  const ReplicaSplitCost price(cfg, cm);
  for (int64_t len : {int64_t{300}, int64_t{2000}}) {
    const int m = 8;
    const std::vector<cost::SliceShape> chunk(m, cost::SliceShape{0, len, true});
    ChunkLimit limit;
    limit.tokens = m * len;
    limit.time = whole_cost(cm, chunk);
    EXPECT_NEAR(m * price.work(len, limit), whole_cost(cm, chunk), 1e-9 * limit.time) << len;
    // Alone in a chunk it would run at a smaller chunk's efficiency: packed it costs less.
    const cost::SliceShape alone{0, len, true};
    EXPECT_LT(price.work(len, limit), whole_cost(cm, std::span<const cost::SliceShape>(&alone, 1)));
  }
}

TEST(ReplicaPrice, TheLeadsLimitIsItsFirstSliceAtOneOfThePlannersK) {
  const Config cfg = price_config();
  const auto cm = cost::CostModel::from_config(cfg);
  const ReplicaSplitCost price(cfg, cm);
  const auto ks = sequence_slice_candidates(256);
  for (int64_t len : {int64_t{8192}, int64_t{98304}})
    for (int64_t rest : {int64_t{0}, int64_t{400000}}) {
      const ChunkLimit lim = price.lead_limit(len, rest);
      EXPECT_NE(std::find(ks.begin(), ks.end(), lim.slices), ks.end());
      if (lim.slices == 1) {  // whole sequences packed into chunks of 1, 2, 4, ... times the lead
        const int64_t times = lim.tokens / len;
        EXPECT_EQ(times * len, lim.tokens);
        EXPECT_EQ(times & (times - 1), 0) << times;
        continue;
      }
      EXPECT_LE(lim.tokens, len);
      // Its own slices: M + K·F, not one more from rounding.
      EXPECT_NEAR(price.work(len, lim), price.marginal(len) + lim.slices * price.overhead(),
                  1e-9 * price.work(len, lim));
      const cost::SliceShape first{0, lim.tokens, false}, longer{0, lim.tokens + 1, false};
      EXPECT_LE(whole_cost(cm, std::span<const cost::SliceShape>(&first, 1)), lim.time);
      EXPECT_GT(whole_cost(cm, std::span<const cost::SliceShape>(&longer, 1)), lim.time);
    }
  // More short tokens beside the lead amortise the fill over more chunks: never a finer cut.
  EXPECT_LE(price.lead_limit(98304, 400000).slices, price.lead_limit(98304, 0).slices);
}

// Replica shares as the split builds them: a long sequence alone, a long one among short ones,
// short ones only. Where the planner's predicted steps of two shares differ by more than 10%
// the price orders them the same way, and its ratio to the planner's step varies less than the
// whole-sequence price's (one chunk per sequence at its own efficiency, as the split priced
// before).
TEST(ReplicaPrice, OrdersReplicaSharesAsThePlannersPredictedSteps) {
  const Config cfg = price_config();
  const auto cm = cost::CostModel::from_config(cfg);
  const ReplicaSplitCost price(cfg, cm);
  auto shorts = [](int n, int64_t first, int64_t step) {
    std::vector<int64_t> out;
    for (int i = 0; i < n; ++i) out.push_back(first + step * (i % 17));
    return out;
  };
  auto with = [](int64_t lead, std::vector<int64_t> rest) {
    rest.insert(rest.begin(), lead);
    return rest;
  };
  const std::vector<std::vector<int64_t>> shares = {
      {98304},
      {98304, 98304},
      with(98304, shorts(60, 300, 90)),
      with(49152, shorts(120, 300, 90)),
      shorts(400, 300, 90),
      shorts(200, 1500, 300),
  };
  std::vector<double> planned, priced, whole;
  for (const auto& s : shares) {
    planned.push_back(make_plan_detailed(cfg, cm, s, Schedule::epp, 1).plan.predicted_step_time);
    priced.push_back(price.share(s));
    double w = 0;
    for (int64_t l : s) {
      const cost::SliceShape sh{0, l, true};
      w += whole_cost(cm, std::span<const cost::SliceShape>(&sh, 1));
    }
    whole.push_back(w);
  }
  auto spread = [&](const std::vector<double>& v) {
    double lo = 1e300, hi = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      lo = std::min(lo, v[i] / planned[i]);
      hi = std::max(hi, v[i] / planned[i]);
    }
    return hi / lo;
  };
  for (size_t i = 0; i < shares.size(); ++i)
    for (size_t j = 0; j < shares.size(); ++j) {
      if (planned[i] <= 1.1 * planned[j]) continue;
      EXPECT_GT(priced[i], priced[j]) << "share " << i << " plans " << planned[i] << " s, share "
                                      << j << " " << planned[j] << " s";
    }
  const double priced_spread = spread(priced), whole_spread = spread(whole);
  RecordProperty("priced_spread", std::to_string(priced_spread));
  RecordProperty("whole_sequence_spread", std::to_string(whole_spread));
  EXPECT_LT(priced_spread, whole_spread);
  EXPECT_LT(priced_spread, 1.15);
}

}  // namespace
}  // namespace infinipipe::plan
