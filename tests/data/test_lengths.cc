#include "data/lengths.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "common/data_test_util.h"
#include "common/error_text.h"
#include "core/error.h"

namespace infinipipe::data {
namespace {

using test::ScratchDir;

using testing::error_text;

TEST(LengthsFromText, ParsesLengthsCommentsAndBlankLines) {
  ScratchDir dir;
  const std::string path = dir.file("l.txt");
  test::write_text(path, "# lengths of one batch\n4096\n\n  17 # a short one\r\n131072\n");
  EXPECT_EQ(lengths_from_text(path), (std::vector<int64_t>{4096, 17, 131072}));
}

TEST(LengthsFromText, ErrorsNameTheLine) {
  ScratchDir dir;
  const std::string path = dir.file("bad.txt");
  for (const std::string bad : {"12x", "-5", "0", "1.5", "99999999999999999999", "a b"}) {
    test::write_text(path, "100\n# ok\n" + bad + "\n200\n");
    const std::string msg = error_text([&] { lengths_from_text(path); });
    EXPECT_NE(msg.find(path + ":3:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("positive integer"), std::string::npos) << msg;
  }
  test::write_text(path, "# nothing\n\n");
  EXPECT_NE(error_text([&] { lengths_from_text(path); }).find("no sequence lengths"),
            std::string::npos);
  EXPECT_NE(error_text([&] { lengths_from_text(dir.file("missing.txt")); }).find("cannot be read"),
            std::string::npos);
}

TEST(LengthsSynthetic, FixedAndUniform) {
  EXPECT_EQ(lengths_synthetic("fixed", 5, 777, 1), std::vector<int64_t>(5, 777));
  const auto u = lengths_synthetic("uniform", 20000, 1000, 7);
  EXPECT_EQ(*std::min_element(u.begin(), u.end()), 1);
  EXPECT_EQ(*std::max_element(u.begin(), u.end()), 1000);
  const double mean = std::accumulate(u.begin(), u.end(), 0.0) / static_cast<double>(u.size());
  EXPECT_NEAR(mean, 500.5, 10.0);  // 4 standard errors
}

TEST(LengthsSynthetic, SameSeedSameLengths) {
  for (const char* name : kLengthDistributions) {
    EXPECT_EQ(lengths_synthetic(name, 1000, 65536, 3), lengths_synthetic(name, 1000, 65536, 3));
  }
  EXPECT_NE(lengths_synthetic("github", 1000, 65536, 3),
            lengths_synthetic("github", 1000, 65536, 4));
}

TEST(LengthsSynthetic, BadArgumentsAreConfigErrors) {
  EXPECT_THROW(lengths_synthetic("wikipedia", 10, 100, 1), ConfigError);
  EXPECT_THROW(lengths_synthetic("github", 0, 100, 1), ConfigError);
  EXPECT_THROW(lengths_synthetic("github", 10, 0, 1), ConfigError);
}

// The long-tail shape github and commoncrawl promise (docs/data.md): over 90% of sequences at or
// below 8K, under 1% at or above 64K, yet those hold 15% or more of the tokens.
TEST(LengthsSynthetic, LongTailShares) {
  for (const std::string name : {"github", "commoncrawl"}) {
    for (const int64_t seq_length : {131072, 262144}) {
      for (const uint64_t seed : {1, 2, 3}) {
        SCOPED_TRACE(name + " " + std::to_string(seq_length) + " seed " + std::to_string(seed));
        const auto lengths = lengths_synthetic(name, 20000, seq_length, seed);
        ASSERT_EQ(lengths.size(), 20000u);
        int64_t short_seqs = 0, long_seqs = 0, long_tokens = 0, tokens = 0;
        for (const int64_t len : lengths) {
          ASSERT_GE(len, 1);
          ASSERT_LE(len, seq_length);
          short_seqs += len <= 8192;
          long_seqs += len >= 65536;
          long_tokens += len >= 65536 ? len : 0;
          tokens += len;
        }
        EXPECT_GT(short_seqs, 0.90 * 20000);
        EXPECT_LT(long_seqs, 0.01 * 20000);
        EXPECT_GT(long_seqs, 0);
        EXPECT_GE(static_cast<double>(long_tokens), 0.15 * static_cast<double>(tokens));
        // length_stats agrees with the direct count.
        const LengthStats st = length_stats(lengths);
        EXPECT_EQ(st.buckets.back().sequences, long_seqs);
        EXPECT_EQ(st.buckets.back().tokens, long_tokens);
      }
    }
  }
}

TEST(LengthsSynthetic, ShortMaximumTruncatesTheTail) {
  const auto lengths = lengths_synthetic("github", 20000, 32768, 1);
  EXPECT_EQ(*std::max_element(lengths.begin(), lengths.end()), 32768);
  // The Pareto tail (3% from 16K up) piles onto the maximum.
  EXPECT_GT(std::count(lengths.begin(), lengths.end(), 32768), 100);
}

TEST(LengthStats, BucketsEdgesAndPercentiles) {
  const std::vector<int64_t> lengths = {1024, 1025, 2048, 8192, 8193, 65535, 65536, 300000, 1, 0};
  const LengthStats st = length_stats(lengths);
  ASSERT_EQ(st.buckets.size(), 8u);
  const std::vector<int64_t> expect_seqs = {3, 2, 0, 1, 1, 0, 1, 2};
  int64_t tokens = 0;
  double seq_share = 0, token_share = 0;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(st.buckets[i].sequences, expect_seqs[i]) << st.buckets[i].label;
    tokens += st.buckets[i].tokens;
    seq_share += st.buckets[i].sequence_share;
    token_share += st.buckets[i].token_share;
  }
  EXPECT_EQ(st.buckets[0].label, "<=1K");
  EXPECT_EQ(st.buckets[7].label, ">=64K");
  EXPECT_EQ(st.buckets[7].tokens, 65536 + 300000);
  EXPECT_EQ(tokens, std::accumulate(lengths.begin(), lengths.end(), int64_t{0}));
  EXPECT_EQ(st.total_tokens, tokens);
  EXPECT_NEAR(seq_share, 1.0, 1e-12);
  EXPECT_NEAR(token_share, 1.0, 1e-12);
  EXPECT_EQ(st.count, 10);
  EXPECT_EQ(st.min, 0);
  EXPECT_EQ(st.max, 300000);
  // Nearest rank on the sorted list 0 1 1024 1025 2048 8192 8193 65535 65536 300000.
  EXPECT_EQ(st.p50, 2048);
  EXPECT_EQ(st.p90, 65536);
  EXPECT_EQ(st.p99, 300000);
  const std::string table = format_length_stats(st);
  EXPECT_NE(table.find("| >=64K | 2 | 20.00 |"), std::string::npos) << table;
  EXPECT_NE(table.find("p90 65536"), std::string::npos) << table;
}

TEST(LengthStats, PercentilesMatchASortedCopy) {
  const auto lengths = lengths_synthetic("commoncrawl", 999, 100000, 9);
  auto sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  const LengthStats st = length_stats(lengths);
  EXPECT_EQ(st.p50, sorted[499]);  // ceil(0.5 * 999) = 500th value
  EXPECT_EQ(st.p90, sorted[899]);  // ceil(899.1) = 900th
  EXPECT_EQ(st.p99, sorted[989]);  // ceil(989.01) = 990th
  EXPECT_EQ(st.max, sorted.back());
}

TEST(LengthStats, EmptyAndNegative) {
  const LengthStats st = length_stats({});
  EXPECT_EQ(st.count, 0);
  EXPECT_EQ(st.buckets.size(), 8u);
  const std::vector<int64_t> bad = {5, -1};
  EXPECT_THROW(length_stats(bad), Error);
}

}  // namespace
}  // namespace infinipipe::data
