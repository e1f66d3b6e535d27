#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/batch_sampler.h"
#include "data/blend.h"
#include "data/document_stream.h"
#include "data/split.h"

namespace infinipipe::data {
namespace {

std::vector<BlendEntry> parse(std::vector<std::string> words) {
  return blend_parse(words);
}

TEST(Blend, ParsesMegatronForms) {
  const auto one = parse({"A"});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(blend_unweighted(one));

  const auto w = parse({"3", "A", "1", "B"});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].prefix, "A");
  EXPECT_EQ(w[1].prefix, "B");
  EXPECT_DOUBLE_EQ(w[0].weight, 0.75);
  EXPECT_DOUBLE_EQ(w[1].weight, 0.25);
  EXPECT_FALSE(blend_unweighted(w));

  const auto u = parse({"A", "B", "C"});
  ASSERT_EQ(u.size(), 3u);
  EXPECT_TRUE(blend_unweighted(u));
  const std::vector<int64_t> counts{10, 30, 60};
  const auto wc = blend_weights_from_counts(counts);
  EXPECT_DOUBLE_EQ(wc[2], 0.6);
}

TEST(Blend, RefusesMalformedLists) {
  EXPECT_THROW(parse({}), ConfigError);
  EXPECT_THROW(parse({"0.3", "A", "0.7"}), ConfigError);  // a weight without a prefix
  EXPECT_THROW(parse({"-1", "A", "2", "B"}), ConfigError);
  EXPECT_THROW(parse({"0", "A", "0", "B"}), ConfigError);
  EXPECT_THROW(parse({"A", "0.5", "B"}), ConfigError);         // prefixes mixed with a weight
  EXPECT_THROW(parse({"0.5", "0.5", "1", "B"}), ConfigError);  // a weight where a prefix goes
  EXPECT_THROW(parse({"nan", "A"}), ConfigError);
}

// Megatron's rule keeps every prefix of the sample order within one sample of each weight.
TEST(Blend, EveryPrefixFollowsTheWeights) {
  const std::vector<double> w{0.5, 0.3, 0.2};
  BlendCursor c(w);
  for (int64_t i = 1; i <= 5000; ++i) {
    c.next();
    for (size_t d = 0; d < w.size(); ++d) {
      ASSERT_LE(std::abs(static_cast<double>(c.taken()[d]) - w[d] * static_cast<double>(i)), 1.0)
          << "dataset " << d << " after " << i << " samples";
    }
  }
  BlendCursor r(w);
  r.set_consumed(5000);
  EXPECT_EQ(r.taken(), c.taken());
}

TEST(Split, MegatronRangesAreDisjointAndCoverEveryDocument) {
  const auto w = split_parse("969,30,1");
  const auto r = split_ranges(1000, w);
  EXPECT_EQ(r[0].begin, 0);
  EXPECT_EQ(r[0].end, 969);
  EXPECT_EQ(r[1].begin, 969);
  EXPECT_EQ(r[1].end, 999);
  EXPECT_EQ(r[2].begin, 999);
  EXPECT_EQ(r[2].end, 1000);
  for (int64_t n : {1, 2, 3, 7, 10, 99, 1001, 123457}) {
    for (const char* s : {"969,30,1", "1,1,1", "100,0,0", "0,1,0", "2 1", "1/1/1"}) {
      const auto rr = split_ranges(n, split_parse(s));
      EXPECT_EQ(rr[0].begin, 0) << s << " n=" << n;
      EXPECT_EQ(rr[0].end, rr[1].begin) << s << " n=" << n;
      EXPECT_EQ(rr[1].end, rr[2].begin) << s << " n=" << n;
      EXPECT_EQ(rr[2].end, n) << s << " n=" << n;
      EXPECT_EQ(rr, split_ranges(n, split_parse(s)));
    }
  }
  EXPECT_THROW(split_parse("1,2,3,4"), ConfigError);
  EXPECT_THROW(split_parse("1,x,3"), ConfigError);
  EXPECT_THROW(split_parse("0,0,0"), ConfigError);
}

TEST(DocumentStream, OneDatasetOrdersAsTheBatchSampler) {
  DocumentStream s({{0, 37}}, {1.0}, 8, 11);
  BatchSampler b(37, 8, 11);
  for (int i = 0; i < 20; ++i) {  // several epochs
    const auto got = s.next();
    const auto want = b.next();
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].dataset, 0);
      EXPECT_EQ(got[k].document, want[k]) << "batch " << i;
    }
  }
}

TEST(DocumentStream, BlendStaysInsideSplitsFollowsWeightsAndResumes) {
  // Dataset 0 holds documents [0, 90) of its train split, dataset 1 [5, 25).
  const std::vector<DocRange> ranges{{0, 90}, {5, 25}};
  const std::vector<double> w{0.7, 0.3};
  DocumentStream s(ranges, w, 10, 3);
  std::vector<std::vector<DocumentRef>> batches;
  for (int i = 0; i < 200; ++i) batches.push_back(s.next());
  std::vector<int64_t> count(2, 0);
  for (const auto& b : batches) {
    for (const DocumentRef& r : b) {
      const DocRange& rg = ranges[static_cast<size_t>(r.dataset)];
      ASSERT_GE(r.document, rg.begin);
      ASSERT_LT(r.document, rg.end);
      ++count[static_cast<size_t>(r.dataset)];
    }
  }
  EXPECT_NEAR(static_cast<double>(count[0]) / 2000.0, 0.7, 1e-3);
  EXPECT_NEAR(static_cast<double>(count[1]) / 2000.0, 0.3, 1e-3);
  // Dataset 1 cycles through all 20 of its documents once per 20 of its samples.
  DocumentStream r(ranges, w, 10, 3);
  r.set_consumed_samples(10 * 57);
  for (int i = 57; i < 200; ++i) ASSERT_EQ(r.next(), batches[static_cast<size_t>(i)]) << i;
  EXPECT_THROW(DocumentStream({{0, 10}, {3, 3}}, {0.5, 0.5}, 4, 1), ConfigError);
}

}  // namespace
}  // namespace infinipipe::data
