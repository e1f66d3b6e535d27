#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "core/error.h"
#include "plan/sequence_processor.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using testing::small_config;

// Long-tail batch: mostly short sequences, a few long ones up to `max_len`.
std::vector<int64_t> processor_long_tail(std::mt19937& rng, int n, int64_t max_len) {
  std::lognormal_distribution<double> body(6.5, 1.0);
  std::uniform_int_distribution<int64_t> tail(max_len / 4, max_len);
  std::bernoulli_distribution is_long(0.06);
  std::vector<int64_t> out(n);
  for (auto& l : out)
    l = is_long(rng) ? tail(rng) : std::clamp<int64_t>(static_cast<int64_t>(body(rng)), 1, max_len);
  out[0] = max_len;  // at least one long sequence
  return out;
}

void expect_well_formed(const ProcessorResult& r, std::span<const int64_t> lengths,
                        const cost::CostModel& cm, const cost::StageShape& st, int64_t min_tail) {
  // Every token exactly once, slices of a sequence in consecutive chunks and in order.
  std::map<int32_t, std::vector<std::pair<size_t, Slice>>> by_seq;
  for (size_t c = 0; c < r.chunks.size(); ++c) {
    ASSERT_EQ(r.chunks[c].id, static_cast<int32_t>(c));
    int tails = 0, splits = 0;
    for (const Slice& s : r.chunks[c].slices) {
      by_seq[s.seq].push_back({c, s});
      tails += s.is_tail();
      splits += s.is_split();
      EXPECT_EQ(s.seq_len, lengths[s.seq]);
    }
    EXPECT_LE(tails, 1) << "chunk " << c << " holds two tail slices";
    if (splits > 0) {
      EXPECT_EQ(r.chunks[c].slices.size(), 1u) << "split chunk " << c << " is mixed";
    }
    // Token threshold is hard.
    EXPECT_LE(r.chunks[c].tokens(), r.limits.token_threshold) << "chunk " << c;
    // Time threshold: split chunks within the derived T_t; packs within T_t as the packing's
    // relaxations left it (they persist, so the reported T_t bounds every pack).
    const auto sh = r.chunks[c].shapes();
    const double t = chunk_cost(cm, st, sh);
    if (splits > 0) {
      EXPECT_LE(t, r.derived_time_threshold * (1 + 1e-9)) << "chunk " << c;
    }
    if (tails == 0) {
      EXPECT_LE(t, r.limits.time_threshold * (1 + 1e-9)) << "chunk " << c;
    }
  }
  // A relaxation persists: T_t stays raised to the chunk it made.
  if (r.relaxed == 0) {
    EXPECT_EQ(r.limits.time_threshold, r.derived_time_threshold);
  } else {
    EXPECT_GT(r.limits.time_threshold, r.derived_time_threshold);
  }
  ASSERT_EQ(by_seq.size(), lengths.size());
  for (auto& [seq, list] : by_seq) {
    int64_t at = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const auto& [c, s] = list[i];
      EXPECT_EQ(s.offset, at) << "sequence " << seq;
      at += s.len;
      if (i > 0) {
        EXPECT_EQ(c, list[i - 1].first + 1) << "slices of " << seq << " not consecutive";
      }
      if (s.is_tail()) {
        EXPECT_GE(s.len, min_tail) << "tail of sequence " << seq;
      }
    }
    EXPECT_EQ(at, lengths[seq]) << "sequence " << seq;
  }
}

TEST(SequenceProcessor, RandomWorkloadsAreWellFormed) {
  Config cfg = small_config(4);
  cfg.model.seq_length = 65536;
  const auto cm = cost::CostModel::from_config(cfg);
  const auto st = processor_reference_stage(cfg.model, 4);
  std::mt19937 rng(7);
  int sliced = 0, relaxed = 0;
  for (int trial = 0; trial < 25; ++trial) {
    const auto lengths = processor_long_tail(rng, 20 + trial * 7, 4096 << (trial % 5));
    for (int32_t k : {1, 2, 3, 5, 8, 16}) {
      const auto r = sequence_process(lengths, k, cm, st, 1024);
      SCOPED_TRACE(::testing::Message() << "trial " << trial << " k " << k);
      expect_well_formed(r, lengths, cm, st, 1024);
      sliced += r.slices_of_longest > 1;
      relaxed += r.relaxed > 0;

      // The longest sequence leads.
      const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
      EXPECT_EQ(r.chunks.front().slices.front().seq_len, longest);
    }
  }
  EXPECT_GT(sliced, 50);
  EXPECT_GT(relaxed, 0) << "no workload needed a relaxed T_t";
}

// Best-Fit-Decreasing opens a bucket only when no other fits: the first (longest) sequence of
// every batched chunk fitted no hybrid chunk within both thresholds, even as that chunk ended up
// (buckets only grow). Filling empty buckets first left tail slices alone in tiny chunks.
TEST(SequenceProcessor, TailBucketsFillBeforeEmptyOnes) {
  Config cfg = small_config(4);
  cfg.model.seq_length = 65536;
  const auto cm = cost::CostModel::from_config(cfg);
  const auto st = processor_reference_stage(cfg.model, 4);
  std::mt19937 rng(31);
  int hybrids_with_shorts = 0;
  for (int trial = 0; trial < 20; ++trial) {
    const auto lengths = processor_long_tail(rng, 60 + trial * 5, 16384 << (trial % 3));
    for (int32_t k : {2, 4, 8}) {
      const auto r = sequence_process(lengths, k, cm, st, 1024);
      SCOPED_TRACE(::testing::Message() << "trial " << trial << " k " << k);
      for (const Chunk& hybrid : r.chunks) {
        if (hybrid.kind() != ChunkKind::hybrid) continue;
        hybrids_with_shorts += hybrid.slices.size() > 1;
        for (const Chunk& packed : r.chunks) {
          if (packed.kind() != ChunkKind::batched) continue;
          int64_t first = 0;
          for (const Slice& x : packed.slices) first = std::max(first, x.len);
          auto shapes = hybrid.shapes();
          shapes.push_back({0, first, true});
          const bool fits = hybrid.tokens() + first <= r.limits.token_threshold &&
                            chunk_cost(cm, st, shapes) <= r.limits.time_threshold;
          EXPECT_FALSE(fits) << "chunk " << packed.id << " opened for a sequence of " << first
                             << " tokens that fits hybrid chunk " << hybrid.id;
        }
      }
    }
  }
  EXPECT_GT(hybrids_with_shorts, 20);
}

TEST(SequenceProcessor, BalancedSplitEqualisesCostAndShrinksLaterSlices) {
  Config cfg = small_config(4);
  cfg.model.seq_length = 131072;
  cfg.model.hidden_size = 1024;
  cfg.model.num_attention_heads = 8;
  const auto cm = cost::CostModel::from_config(cfg);
  const auto st = processor_reference_stage(cfg.model, 4);
  for (int32_t k : {2, 4, 8}) {
    const auto s = sequence_split_balanced(0, 131072, k, cm, st, 1024);
    ASSERT_EQ(static_cast<int32_t>(s.size()), k);
    double lo = 1e30, hi = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const cost::SliceShape sh{s[i].offset, s[i].len, i + 1 == s.size()};
      const double c = chunk_cost(cm, st, std::span<const cost::SliceShape>(&sh, 1));
      lo = std::min(lo, c);
      hi = std::max(hi, c);
      if (i > 0) {
        EXPECT_LE(s[i].len, s[i - 1].len) << "k " << k << " slice " << i;
      }
    }
    EXPECT_LT(hi / lo, 1.35) << "k " << k;  // power-of-two snapping may cost up to ~10% each
    EXPECT_LT(s.back().len, s.front().len) << "k " << k;  // later slices attend to more context
  }
}

TEST(SequenceProcessor, TailNeverBelowMinimum) {
  Config cfg = small_config(2);
  cfg.model.seq_length = 20000;
  const auto cm = cost::CostModel::from_config(cfg);
  const auto st = processor_reference_stage(cfg.model, 2);
  for (int64_t min_tail : {256, 1024, 3000}) {
    for (int64_t len : {5000, 8193, 12345, 20000}) {
      PackLimits lim{chunk_cost(cm, st, std::vector<cost::SliceShape>{{0, 4096, false}}), 4096,
                     min_tail};
      const auto s = sequence_split_capped(0, len, lim, cm, st);
      int64_t at = 0;
      for (const Slice& x : s) {
        EXPECT_EQ(x.offset, at);
        at += x.len;
      }
      EXPECT_EQ(at, len);
      if (s.size() > 1) {
        EXPECT_GE(s.back().len, min_tail) << len << " " << min_tail;
      }
    }
  }
}

TEST(SequenceProcessor, KOneIsBatchLevelPacking) {
  Config cfg = small_config(2);
  const auto cm = cost::CostModel::from_config(cfg);
  const auto st = processor_reference_stage(cfg.model, 2);
  const std::vector<int64_t> lengths{4000, 3000, 1000, 900, 500, 100};
  const auto r = sequence_process(lengths, 1, cm, st, 1024);
  EXPECT_EQ(r.limits.token_threshold, 4000);
  for (const Chunk& c : r.chunks)
    for (const Slice& s : c.slices) EXPECT_TRUE(s.is_whole());
}

TEST(SequenceProcessor, RejectsEmptySequence) {
  Config cfg = small_config(2);
  const auto cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> lengths{100, 0};
  EXPECT_THROW(sequence_process(lengths, 1, cm, processor_reference_stage(cfg.model, 2), 1024),
               Error);
}

}  // namespace
}  // namespace infinipipe::plan
