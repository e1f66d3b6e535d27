#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <string>

#include "core/error.h"
#include "plan/budget_error.h"
#include "plan/planner.h"
#include "plan/replica_balance.h"
#include "plan/schedule_table.h"
#include "plan/sequence_processor.h"
#include "plan/validate.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using testing::small_config;

std::vector<int64_t> long_tail(std::mt19937& rng, int n, int64_t max_len) {
  std::lognormal_distribution<double> body(6.0, 1.0);
  std::uniform_int_distribution<int64_t> tail(max_len / 2, max_len);
  std::bernoulli_distribution is_long(0.05);
  std::vector<int64_t> out(n);
  for (auto& l : out)
    l = is_long(rng) ? tail(rng) : std::clamp<int64_t>(static_cast<int64_t>(body(rng)), 1, max_len);
  out[n / 2] = max_len;
  return out;
}

void expect_covers(const Plan& p) {
  std::map<int32_t, int64_t> covered;
  for (const Chunk& c : p.chunks)
    for (const Slice& s : c.slices) covered[s.seq] += s.len;
  ASSERT_EQ(covered.size(), p.seq_lengths.size());
  for (auto [seq, n] : covered) EXPECT_EQ(n, p.seq_lengths[seq]);
}

Config planner_config(int32_t pp) {
  Config cfg = small_config(pp);
  cfg.model.seq_length = 16384;
  return cfg;
}

TEST(Planner, EverySchedulePlansValidOnRandomWorkloads) {
  std::mt19937 rng(21);
  for (int trial = 0; trial < 4; ++trial) {
    Config cfg = planner_config(trial % 2 ? 4 : 2);
    const auto cm = cost::CostModel::from_config(cfg);
    const auto lengths = long_tail(rng, 24 + 8 * trial, 16384);
    for (Schedule s : {Schedule::epp, Schedule::one_f_one_b, Schedule::gpipe, Schedule::seq1f1b,
                       Schedule::interleaved}) {
      SCOPED_TRACE(::testing::Message() << "trial " << trial << " " << schedule_name(s));
      const auto r = make_plan_detailed(cfg, cm, lengths, s);
      EXPECT_TRUE(validate(r.plan, cm, cfg).ok()) << validate(r.plan, cm, cfg).message();
      expect_covers(r.plan);
      EXPECT_GT(r.plan.predicted_step_time, 0);
      EXPECT_EQ(r.plan.schedule, schedule_name(s));
      for (int64_t peak : r.plan.predicted_peak_bytes) EXPECT_LE(peak, r.plan.memory_budget);
    }
  }
}

// One long sequence and a few short ones: packing up to the longest leaves two micro-batches,
// fewer than interleaving needs on pp = 4; the tuner also tries one sequence per micro-batch.
TEST(Planner, InterleavedFallsBackToOneSequencePerMicroBatch) {
  Config cfg = planner_config(4);
  const auto cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> lengths{16384, 100, 200, 300, 400, 500};
  const auto r = make_plan_detailed(cfg, cm, lengths, Schedule::interleaved);
  EXPECT_TRUE(validate(r.plan, cm, cfg).ok()) << validate(r.plan, cm, cfg).message();
  EXPECT_EQ(r.knobs.micro_batch_size, 1);
  EXPECT_EQ(r.plan.chunks.size(), lengths.size());
  expect_covers(r.plan);
}

TEST(Planner, TightBudgetForcesRecomputeAndStillFits) {
  std::mt19937 rng(4);
  Config cfg = planner_config(4);
  const auto cm = cost::CostModel::from_config(cfg);
  const auto lengths = long_tail(rng, 48, 16384);
  const auto roomy = make_plan_detailed(cfg, cm, lengths, Schedule::epp);
  const int64_t peak = *std::max_element(roomy.plan.predicted_peak_bytes.begin(),
                                         roomy.plan.predicted_peak_bytes.end());
  // Find the smallest budget the planner accepts, then plan just above it.
  cfg.training.memory_budget = 1;
  int64_t least = 0;
  try {
    make_plan(cfg, cm, lengths);
    FAIL() << "a 1-byte budget cannot fit";
  } catch (const BudgetError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("smallest budget that fits"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fmt::format("({} bytes, for rank {})", e.least_budget(), e.rank())),
              std::string::npos)
        << msg;
    least = e.least_budget();
  }
  ASSERT_GT(least, 0);
  EXPECT_LE(least, peak);
  cfg.training.memory_budget = least;
  const auto tight = make_plan_detailed(cfg, cm, lengths, Schedule::epp);
  EXPECT_TRUE(validate(tight.plan, cm, cfg).ok());
  EXPECT_GE(tight.plan.predicted_step_time, roomy.plan.predicted_step_time * 0.999);
}

// The least budget a too-small one reports is under the user's own recompute setting: without
// recompute it is the no-recompute peak, so planning at it succeeds with no layer recomputed,
// and a byte less fails again; the error is a ConfigError naming the binding rank.
TEST(Planner, LeastBudgetHonoursTheUsersRecomputeSetting) {
  std::mt19937 rng(7);
  Config cfg = planner_config(2);
  cfg.parallel.recompute_granularity = RecomputeGranularity::none;
  const auto cm = cost::CostModel::from_config(cfg);
  const auto lengths = long_tail(rng, 32, 8192);
  for (Schedule s : {Schedule::one_f_one_b, Schedule::seq1f1b, Schedule::epp}) {
    SCOPED_TRACE(schedule_name(s));
    auto least_at = [&](int64_t budget) -> std::optional<BudgetError> {
      cfg.training.memory_budget = budget;
      try {
        make_plan_detailed(cfg, cm, lengths, s);
      } catch (const BudgetError& e) {
        return e;
      }
      return std::nullopt;
    };
    const auto tiny = least_at(1);
    ASSERT_TRUE(tiny.has_value()) << "a 1-byte budget cannot fit";
    const ConfigError& as_config = *tiny;  // exit 2: the user's budget is the mistake
    EXPECT_NE(std::string(as_config.what()).find("--recompute-granularity adaptive"),
              std::string::npos)
        << as_config.what();
    EXPECT_GE(tiny->rank(), 0);
    EXPECT_LT(tiny->rank(), 2);
    const int64_t least = tiny->least_budget();
    cfg.training.memory_budget = least;
    const PlanResult r = make_plan_detailed(cfg, cm, lengths, s);
    EXPECT_TRUE(validate(r.plan, cm, cfg).ok());
    for (const auto& list : r.plan.actions)
      for (const Action& a : list) EXPECT_EQ(a.recompute_layers, 0);
    if (s != Schedule::epp) {  // batch-level candidates do not depend on the budget
      const auto below = least_at(least - 1);
      ASSERT_TRUE(below.has_value());
      EXPECT_EQ(below->least_budget(), least);
    }
  }
}

TEST(Planner, BatchLevelSchedulesNeedTheLongestSequenceInOneMicroBatch) {
  const std::vector<int64_t> lengths{9000, 100, 200, 8000};
  const auto mbs = pack_micro_batches(lengths, 9000);
  for (const Chunk& c : mbs) EXPECT_LE(c.tokens(), 9000);
  EXPECT_THROW(pack_micro_batches(lengths, 8999), Error);
}

TEST(Planner, Seq1f1bChunksCoverEveryTokenOnce) {
  Config cfg = planner_config(2);
  const auto cm = cost::CostModel::from_config(cfg);
  const auto st = processor_reference_stage(cfg.model, 2);
  std::mt19937 rng(8);
  const auto lengths = long_tail(rng, 30, 16384);
  for (int32_t k : {1, 2, 4, 8}) {
    const auto chunks = seq1f1b_chunks(lengths, 32768, k, cm, st);
    std::map<int32_t, int64_t> next;
    for (const Chunk& c : chunks) {
      int splits = 0;
      for (const Slice& s : c.slices) {
        EXPECT_EQ(s.offset, next[s.seq]) << "slices out of order";
        next[s.seq] = s.end();
        splits += s.is_split();
      }
      if (splits) {
        EXPECT_EQ(c.slices.size(), 1u);
      }
    }
    for (size_t i = 0; i < lengths.size(); ++i)
      EXPECT_EQ(next[static_cast<int32_t>(i)], lengths[i]);
  }
}

TEST(Planner, BalanceReplicasKeepsEverySequenceAndBalancesCost) {
  Config cfg = planner_config(2);
  const auto cm = cost::CostModel::from_config(cfg);
  std::mt19937 rng(2);
  const auto lengths = long_tail(rng, 64, 16384);
  const ReplicaSplitCost cost(cfg, cm);
  for (int64_t dp : {1, 2, 4, 8}) {
    const auto parts = balance_replicas(lengths, dp, cm, cfg);
    ASSERT_EQ(static_cast<int64_t>(parts.size()), dp);
    EXPECT_EQ(balance_replicas(lengths, dp, cm, cfg), parts) << "deterministic, dp " << dp;
    std::vector<int64_t> all;
    double lo = 1e30, hi = 0, biggest = 0;
    for (const auto& p : parts) {
      EXPECT_FALSE(p.empty());
      for (int64_t l : p) {
        all.push_back(l);
        const int64_t one[] = {l};
        biggest = std::max(biggest, cost.share(one));
      }
      lo = std::min(lo, cost.share(p));
      hi = std::max(hi, cost.share(p));
    }
    // LPT's bound: the replicas' prices within the costliest sequence's of each other.
    EXPECT_LE(hi - lo, biggest * (1 + 1e-9)) << "dp " << dp;
    auto sorted = lengths;
    std::sort(sorted.begin(), sorted.end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, sorted);
  }
  EXPECT_THROW(balance_replicas(lengths, 100, cm, cfg), ConfigError);
}

TEST(Planner, PipelineGroupingSplitsOnlyWhenMemoryDemandsAndNeverInsideASequence) {
  Config cfg = planner_config(4);
  const auto cm = cost::CostModel::from_config(cfg);
  const auto st = processor_reference_stage(cfg.model, 4);
  std::mt19937 rng(6);
  const auto lengths = long_tail(rng, 64, 16384);
  const int64_t roomy = int64_t{1} << 50;
  // The least activation budget any grouping fits (bisection): there the grouping must split.
  auto least_grouping = [&](const std::vector<Chunk>& chunks) {
    int64_t lo = 0, hi = roomy;  // lo fails, hi fits
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (epp_group_pipelines(chunks, 4, cm, st, mid).empty())
        lo = mid;
      else
        hi = mid;
    }
    return epp_group_pipelines(chunks, 4, cm, st, hi);
  };
  const auto whole = sequence_process(lengths, 1, cm, st, 1024);
  const auto one = epp_group_pipelines(whole.chunks, 4, cm, st, roomy);
  ASSERT_EQ(one.size(), whole.chunks.size());
  EXPECT_EQ(*std::max_element(one.begin(), one.end()), 0);
  const auto split = least_grouping(whole.chunks);
  ASSERT_FALSE(split.empty());
  EXPECT_GT(*std::max_element(split.begin(), split.end()), 0);
  // With sliced sequences, cuts fall only between sequences.
  const auto pr = sequence_process(lengths, 4, cm, st, 1024);
  const auto many = least_grouping(pr.chunks);
  ASSERT_EQ(many.size(), pr.chunks.size());
  std::map<int32_t, int32_t> pipeline_of_seq;
  for (size_t c = 0; c < pr.chunks.size(); ++c) {
    if (c > 0) {
      EXPECT_GE(many[c], many[c - 1]);
    }
    for (const Slice& s : pr.chunks[c].slices) {
      auto [it, fresh] = pipeline_of_seq.emplace(s.seq, many[c]);
      EXPECT_EQ(it->second, many[c]) << "sequence " << s.seq << " cut across pipelines";
    }
  }
}

TEST(Planner, RejectsBadLengths) {
  Config cfg = planner_config(2);
  const auto cm = cost::CostModel::from_config(cfg);
  EXPECT_THROW(make_plan(cfg, cm, std::vector<int64_t>{}), Error);
  EXPECT_THROW(make_plan(cfg, cm, std::vector<int64_t>{10, -3}), Error);
}

}  // namespace
}  // namespace infinipipe::plan
