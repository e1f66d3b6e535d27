// Documents longer than --seq-length on a hand-built dataset: the share truncation drops is the
// tokens past the length over all tokens (a blend's, weighed as it draws), and
// --long-documents split turns every document into consecutive pieces of at most the length
// that together hold each of its tokens exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/data_test_util.h"
#include "data/indexed_dataset.h"
#include "data/outlier_delay_state.h"
#include "data/run_datasets.h"

namespace infinipipe::data {
namespace {

// Documents of the given lengths; token i of document d is d * 1000 + i, so a piece's place in
// its document is visible.
void long_dataset_write(const std::string& prefix, const std::vector<int64_t>& lengths) {
  IndexedDatasetWriter w(prefix, TokenDType::int32);
  for (size_t d = 0; d < lengths.size(); ++d) {
    std::vector<int32_t> tokens;
    for (int64_t i = 0; i < lengths[d]; ++i) tokens.push_back(static_cast<int32_t>(d * 1000 + i));
    w.add_document(tokens);
  }
  w.finalize();
}

DataFlags long_flags(const std::string& data_path, int64_t piece_length = 0) {
  DataFlags f;
  f.data_path = data_path;
  f.piece_length = piece_length;
  return f;
}

const std::vector<int64_t> kLengths = {10, 300, 50, 600, 0, 256};

TEST(LongDocuments, TruncationShareIsTheTokensPastTheLength) {
  test::ScratchDir dir;
  long_dataset_write(dir.file("a"), kLengths);
  const RunDatasets rd = RunDatasets::open(long_flags(dir.file("a")));
  const Truncation t = rd.truncation(DataSplit::train, 256);
  EXPECT_EQ(t.documents, 6);
  EXPECT_EQ(t.tokens, 10 + 300 + 50 + 600 + 256);
  EXPECT_EQ(t.long_documents, 2);  // 256 tokens fit exactly
  EXPECT_EQ(t.dropped_tokens, (300 - 256) + (600 - 256));
  EXPECT_DOUBLE_EQ(t.dropped_share, 388.0 / 1216.0);
  const std::string w = truncation_warning(t, 256, "the training split");
  EXPECT_NE(w.find("2 of the training split's 6 documents"), std::string::npos) << w;
  EXPECT_NE(w.find("31.9%"), std::string::npos) << w;
  EXPECT_NE(w.find("--long-documents split"), std::string::npos) << w;
  EXPECT_EQ(truncation_warning(rd.truncation(DataSplit::train, 600), 600, "x"), "");
}

TEST(LongDocuments, ABlendsShareWeighsEachDatasetAsItIsDrawn) {
  test::ScratchDir dir;
  long_dataset_write(dir.file("long"), {400, 400});  // half of each document dropped at 200
  long_dataset_write(dir.file("short"), {100, 100});
  const RunDatasets rd =
      RunDatasets::open(long_flags("0.25 " + dir.file("long") + " 0.75 " + dir.file("short")));
  const Truncation t = rd.truncation(DataSplit::train, 200);
  // Per draw: 0.25 x 400 tokens of which 200 dropped, 0.75 x 100 tokens of which none.
  EXPECT_DOUBLE_EQ(t.dropped_share, (0.25 * 200) / (0.25 * 400 + 0.75 * 100));
  EXPECT_EQ(t.dropped_tokens, 400);
}

TEST(LongDocuments, SplitKeepsEveryTokenOnceInPiecesOfAtMostTheLength) {
  test::ScratchDir dir;
  long_dataset_write(dir.file("a"), kLengths);
  const int64_t len = 256;
  const RunDatasets rd = RunDatasets::open(long_flags(dir.file("a"), len));
  const int64_t samples = rd.split(DataSplit::train).samples();
  EXPECT_EQ(samples, 1 + 2 + 1 + 3 + 1 + 1);  // the empty document stays one (empty) sample
  // One epoch: every sample once, in the seeded order.
  DocumentStream s = rd.stream(DataSplit::train, samples, 7);
  std::map<int64_t, std::map<int64_t, std::vector<int32_t>>> pieces;  // doc -> start -> tokens
  for (const DocumentRef& ref : s.next()) {
    const int64_t n = std::min(rd.document_length(DataSplit::train, ref), len);
    EXPECT_EQ(ref.start % len, 0);
    EXPECT_TRUE(pieces[ref.document]
                    .emplace(ref.start, rd.document_tokens(DataSplit::train, ref, n))
                    .second)
        << "piece drawn twice in one epoch";
  }
  int64_t total = 0;
  for (size_t d = 0; d < kLengths.size(); ++d) {
    std::vector<int32_t> joined;
    for (const auto& [start, tokens] : pieces[static_cast<int64_t>(d)]) {
      EXPECT_EQ(start, static_cast<int64_t>(joined.size()));
      EXPECT_LE(static_cast<int64_t>(tokens.size()), len);
      joined.insert(joined.end(), tokens.begin(), tokens.end());
    }
    ASSERT_EQ(static_cast<int64_t>(joined.size()), kLengths[d]) << "document " << d;
    for (int64_t i = 0; i < kLengths[d]; ++i)
      EXPECT_EQ(joined[static_cast<size_t>(i)], static_cast<int32_t>(d * 1000 + i));
    total += static_cast<int64_t>(joined.size());
  }
  EXPECT_EQ(total, rd.truncation(DataSplit::train, len).tokens);
}

TEST(LongDocuments, WithoutSplitEachDocumentIsOneSample) {
  test::ScratchDir dir;
  long_dataset_write(dir.file("a"), kLengths);
  const RunDatasets rd = RunDatasets::open(long_flags(dir.file("a")));
  EXPECT_EQ(rd.split(DataSplit::train).samples(), 6);
  DocumentStream s = rd.stream(DataSplit::train, 6, 7);
  for (const DocumentRef& ref : s.next()) EXPECT_EQ(ref.start, 0);
}

TEST(LongDocuments, TheOutlierDelayKeepsAPiecesFirstToken) {
  const DocumentRef ref{0, 3, 512};
  const nlohmann::json state = {{"queue", nlohmann::json::array({{0, 3, 0, 512}})},
                                {"lookahead", nlohmann::json::array()}};
  std::vector<DocumentRef> seen;
  OutlierDelay restored(4, 2, [](int64_t length) { return static_cast<double>(length); });
  outlier_delay_restore(&restored, state, [&seen](const DocumentRef& r) {
    seen.push_back(r);
    return int64_t{88};
  });
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], ref);
  EXPECT_EQ(outlier_delay_state(restored)["queue"][0], state["queue"][0]);
}

}  // namespace
}  // namespace infinipipe::data
