// The datasets of a run as `train` opens them from Megatron's flags: one dataset with the default
// split gives exactly the batches the BatchSampler gave; --split cuts each dataset into disjoint
// document ranges that the splits' streams never leave; a blend's shares follow its weights; the
// per-split paths are used whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "common/data_test_util.h"
#include "core/error.h"
#include "data/batch_sampler.h"
#include "data/indexed_dataset.h"
#include "data/run_datasets.h"

namespace infinipipe::data {
namespace {

DataFlags flags_of(const std::string& data_path, const std::string& split = "100,0,0") {
  DataFlags f;
  f.data_path = data_path;
  f.split = split;
  return f;
}

// Document d holds d % 7 + 2 tokens, all equal to `mark` (so a document's dataset is visible).
void dataset_write(const std::string& prefix, int64_t documents, int32_t mark) {
  IndexedDatasetWriter w(prefix, TokenDType::uint16);
  for (int64_t d = 0; d < documents; ++d) {
    w.add_document(std::vector<int32_t>(static_cast<size_t>(d % 7 + 2), mark));
  }
  w.finalize();
}

TEST(RunDatasets, OneDatasetDefaultSplitGivesTheBatchSamplersBatches) {
  test::ScratchDir dir;
  dataset_write(dir.file("a"), 53, 1);
  const RunDatasets rd = RunDatasets::open(flags_of(dir.file("a")));
  EXPECT_TRUE(rd.has(DataSplit::train));
  EXPECT_FALSE(rd.has(DataSplit::valid));
  EXPECT_FALSE(rd.has(DataSplit::test));
  DocumentStream s = rd.stream(DataSplit::train, 8, 1234);
  BatchSampler b(53, 8, 1234);
  for (int i = 0; i < 20; ++i) {  // three epochs and a bit
    const std::vector<int64_t> want = b.next();
    const std::vector<DocumentRef> got = s.next();
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(got[k], (DocumentRef{0, want[k]})) << "batch " << i << " sample " << k;
    }
  }
  DocumentStream resumed = rd.stream(DataSplit::train, 8, 1234);
  resumed.set_consumed_samples(s.consumed_samples());
  b.set_consumed_samples(s.consumed_samples());
  const std::vector<int64_t> want = b.next();
  const std::vector<DocumentRef> got = resumed.next();
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(got[k].document, want[k]);
}

TEST(RunDatasets, SplitStreamsAreDisjointDeterministicAndStayInTheirRanges) {
  test::ScratchDir dir;
  dataset_write(dir.file("a"), 1000, 1);
  const DataFlags flags = flags_of(dir.file("a"), "969,30,1");
  const RunDatasets rd = RunDatasets::open(flags);
  const std::array<DocRange, 3> want{DocRange{0, 969}, DocRange{969, 999}, DocRange{999, 1000}};
  std::array<std::set<int64_t>, 3> seen;
  for (DataSplit s : {DataSplit::train, DataSplit::valid, DataSplit::test}) {
    const size_t i = static_cast<size_t>(s);
    ASSERT_EQ(rd.split(s).ranges.size(), 1u);
    EXPECT_EQ(rd.split(s).ranges[0], want[i]) << data_split_name(s);
    DocumentStream a = rd.stream(s, 16, 7);
    DocumentStream again = RunDatasets::open(flags).stream(s, 16, 7);
    for (int b = 0; b < 130; ++b) {  // over two epochs of the train split
      const std::vector<DocumentRef> batch = a.next();
      ASSERT_EQ(batch, again.next()) << data_split_name(s) << " batch " << b;
      for (const DocumentRef& r : batch) {
        ASSERT_GE(r.document, want[i].begin) << data_split_name(s);
        ASSERT_LT(r.document, want[i].end) << data_split_name(s);
        seen[i].insert(r.document);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(seen[i].size()), want[i].size()) << "every document drawn";
  }
  // The validation order is not the training order restricted: the splits are seeded apart.
  EXPECT_NE(rd.stream(DataSplit::valid, 4, 7).next(), rd.stream(DataSplit::train, 4, 7).next());
}

TEST(RunDatasets, BlendSharesConvergeToTheWeightsInEverySplit) {
  test::ScratchDir dir;
  dataset_write(dir.file("a"), 400, 1);
  dataset_write(dir.file("b"), 900, 2);
  const RunDatasets rd =
      RunDatasets::open(flags_of("0.6 " + dir.file("a") + " 1.4 " + dir.file("b"), "8,2,0"));
  EXPECT_EQ(rd.prefixes().size(), 2u);  // each prefix opened once for every split
  for (DataSplit s : {DataSplit::train, DataSplit::valid}) {
    DocumentStream st = rd.stream(s, 50, 3);
    int64_t from_b = 0, total = 0;
    for (int b = 0; b < 100; ++b) {
      for (const DocumentRef& r : st.next()) {
        // The token says which file the document came from.
        const int32_t mark = rd.document_tokens(s, r, 1).at(0);
        EXPECT_EQ(mark, r.dataset + 1);
        from_b += r.dataset;
        ++total;
      }
    }
    EXPECT_LE(std::fabs(static_cast<double>(from_b) - 0.7 * static_cast<double>(total)), 1.0)
        << data_split_name(s);
  }
  EXPECT_FALSE(rd.has(DataSplit::test));
  EXPECT_THROW(rd.stream(DataSplit::test, 4, 3), ConfigError);
}

TEST(RunDatasets, PerSplitPathsAreUsedWholeAndUnweightedBlendsWeighByDocuments) {
  test::ScratchDir dir;
  dataset_write(dir.file("a"), 30, 1);
  dataset_write(dir.file("b"), 90, 2);
  DataFlags flags;
  flags.train_data_path = dir.file("a") + " " + dir.file("b");
  flags.valid_data_path = dir.file("b");
  const RunDatasets rd = RunDatasets::open(flags);
  EXPECT_EQ(rd.split(DataSplit::train).documents(), 120);
  EXPECT_NEAR(rd.split(DataSplit::train).weights[0], 0.25, 1e-12);
  EXPECT_EQ(rd.split(DataSplit::valid).ranges[0], (DocRange{0, 90}));
  EXPECT_FALSE(rd.has(DataSplit::test));
}

TEST(RunDatasets, BadFlagsAreClearErrors) {
  test::ScratchDir dir;
  dataset_write(dir.file("a"), 10, 1);
  EXPECT_THROW(RunDatasets::open(flags_of("0.5 " + dir.file("a") + " 0.5")), ConfigError);
  EXPECT_THROW(RunDatasets::open(flags_of("-1 " + dir.file("a"))), ConfigError);
  EXPECT_THROW(RunDatasets::open(flags_of(dir.file("a"), "1,x")), ConfigError);
  EXPECT_THROW(RunDatasets::open(flags_of(dir.file("missing"))), Error);
  // A weighted dataset with no documents in a split that has a share: its one document goes to
  // validation, so the train split of the blend cannot draw from it.
  dataset_write(dir.file("one"), 1, 2);
  const RunDatasets rd =
      RunDatasets::open(flags_of("1 " + dir.file("a") + " 1 " + dir.file("one"), "5,5,0"));
  EXPECT_EQ(rd.split(DataSplit::train).ranges[1].size(), 0);
  EXPECT_THROW(rd.stream(DataSplit::train, 2, 1), ConfigError);
}

}  // namespace
}  // namespace infinipipe::data
