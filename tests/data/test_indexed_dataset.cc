#include "data/indexed_dataset.h"

#include <gtest/gtest.h>

#include <functional>

#include "common/data_test_util.h"
#include "core/error.h"
#include "data/lengths.h"

namespace infinipipe::data {
namespace {

using test::append_le;
using test::ScratchDir;

// Runs fn, expects an infinipipe::Error (not a ConfigError) whose message holds every part.
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error";
  } catch (const ConfigError& e) {
    ADD_FAILURE() << "data faults are runtime errors, got ConfigError: " << e.what();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << msg << "\n  lacks: " << p;
  }
}

// A Megatron index written field by field, independent of IndexedDatasetWriter.
struct RawIndex {
  std::string magic = std::string("MMIDIDX\0\0", 9);
  uint64_t version = 1;
  uint8_t code = 4;  // int32
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers;
  std::vector<int64_t> doc_indices;
  std::vector<char> bytes() const {
    std::vector<char> out(magic.begin(), magic.end());
    append_le(out, version);
    append_le(out, code);
    append_le(out, static_cast<uint64_t>(lengths.size()));
    append_le(out, static_cast<uint64_t>(doc_indices.size()));
    for (auto v : lengths) append_le(out, v);
    for (auto v : pointers) append_le(out, v);
    for (auto v : doc_indices) append_le(out, v);
    return out;
  }
};

// Three int32 sequences stored out of order in .bin: [30 31 32] at byte 16, [40 41] at 28,
// [7 8 9 10] at 0. Document 0 = sequences 0 and 1, document 1 = sequence 2.
RawIndex handmade_index() {
  RawIndex r;
  r.lengths = {3, 2, 4};
  r.pointers = {16, 28, 0};
  r.doc_indices = {0, 2, 3};
  return r;
}
std::vector<char> handmade_bin() {
  std::vector<char> bin;
  for (int32_t t : {7, 8, 9, 10, 30, 31, 32, 40, 41}) append_le(bin, t);
  return bin;
}

TEST(IndexedDataset, ReadsHandmadeMegatronFiles) {
  ScratchDir dir;
  const std::string prefix = dir.file("hand");
  test::write_bytes(prefix + ".idx", handmade_index().bytes());
  test::write_bytes(prefix + ".bin", handmade_bin());
  const IndexedDataset ds = IndexedDataset::open(prefix);
  EXPECT_EQ(ds.dtype(), TokenDType::int32);
  EXPECT_EQ(ds.num_sequences(), 3);
  EXPECT_EQ(ds.num_documents(), 2);
  EXPECT_EQ(ds.num_tokens(), 9);
  EXPECT_EQ(ds.document_length(0), 5);
  EXPECT_EQ(ds.document_length(1), 4);
  EXPECT_EQ(ds.document_tokens(0), (std::vector<int32_t>{30, 31, 32, 40, 41}));
  EXPECT_EQ(ds.document_tokens(1), (std::vector<int32_t>{7, 8, 9, 10}));
  // Truncation may stop inside the first or the second sequence of a document.
  EXPECT_EQ(ds.document_tokens(0, 2), (std::vector<int32_t>{30, 31}));
  EXPECT_EQ(ds.document_tokens(0, 4), (std::vector<int32_t>{30, 31, 32, 40}));
  EXPECT_TRUE(ds.document_tokens(1, 0).empty());
  // A piece (--long-documents split) may start in the first or the second sequence, or past
  // the end.
  EXPECT_EQ(ds.document_tokens(0, 2, 2), (std::vector<int32_t>{32, 40}));
  EXPECT_EQ(ds.document_tokens(0, 9, 3), (std::vector<int32_t>{40, 41}));
  EXPECT_EQ(ds.document_tokens(0, 1, 4), (std::vector<int32_t>{41}));
  EXPECT_TRUE(ds.document_tokens(0, 4, 5).empty());
  EXPECT_EQ(lengths_from_indexed(prefix, 4), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(lengths_from_indexed(prefix, 100), (std::vector<int64_t>{5, 4}));
  expect_error([&] { ds.document_tokens(2); }, {"document 2", "2 documents"});
  expect_error([&] { ds.document_length(-1); }, {"out of range"});
}

TEST(IndexedDataset, AcceptsMultimodalSequenceModes) {
  ScratchDir dir;
  const std::string prefix = dir.file("mm");
  auto idx = handmade_index().bytes();
  idx.insert(idx.end(), {0, 1, 0});  // one int8 mode per sequence
  test::write_bytes(prefix + ".idx", idx);
  test::write_bytes(prefix + ".bin", handmade_bin());
  EXPECT_EQ(IndexedDataset::open(prefix).document_tokens(1), (std::vector<int32_t>{7, 8, 9, 10}));
}

TEST(IndexedDataset, RoundTripsEveryDtype) {
  ScratchDir dir;
  for (uint8_t code = 1; code <= 8; ++code) {
    const auto dtype = static_cast<TokenDType>(code);
    SCOPED_TRACE(token_dtype_name(dtype));
    const bool is_signed = dtype != TokenDType::uint8 && dtype != TokenDType::uint16;
    const int32_t top = token_dtype_size(dtype) == 1 ? 127 : 30000;
    std::vector<std::vector<int32_t>> docs = {{0, 1, 2, top}, {}, {5}};
    std::vector<int32_t> big;
    for (int32_t i = 0; i < 5000; ++i) big.push_back(is_signed ? (i % 255) - 127 : i % 256);
    docs.push_back(big);
    const std::string prefix = dir.file(std::string("rt_") + token_dtype_name(dtype));
    {
      IndexedDatasetWriter w(prefix, dtype);
      for (const auto& d : docs) w.add_document(d);
      w.finalize();
      EXPECT_EQ(w.num_tokens(), 5 + 5000);
    }
    const IndexedDataset ds = IndexedDataset::open(prefix);
    EXPECT_EQ(ds.dtype(), dtype);
    ASSERT_EQ(ds.num_documents(), static_cast<int64_t>(docs.size()));
    for (size_t d = 0; d < docs.size(); ++d) {
      EXPECT_EQ(ds.document_tokens(static_cast<int64_t>(d)), docs[d]);
      EXPECT_EQ(ds.document_length(static_cast<int64_t>(d)), static_cast<int64_t>(docs[d].size()));
    }
    // The .idx layout is exactly Megatron's: 34-byte header + 12 bytes per sequence + 8 per
    // document index.
    EXPECT_EQ(test::read_bytes(prefix + ".idx").size(),
              34 + 12 * docs.size() + 8 * (docs.size() + 1));
    EXPECT_EQ(test::read_bytes(prefix + ".bin").size(),
              static_cast<size_t>(5005 * token_dtype_size(dtype)));
  }
}

TEST(IndexedDatasetWriter, RejectsTokensOutsideTheDtype) {
  ScratchDir dir;
  IndexedDatasetWriter w(dir.file("u8"), TokenDType::uint8);
  const std::vector<int32_t> bad = {1, 256};
  expect_error([&] { w.add_document(bad); }, {"256", "uint8"});
  IndexedDatasetWriter w2(dir.file("u16"), TokenDType::uint16);
  const std::vector<int32_t> neg = {-1};
  expect_error([&] { w2.add_document(neg); }, {"-1", "uint16"});
}

TEST(IndexedDatasetWriter, LeavesNothingBehindWithoutFinalize) {
  ScratchDir dir;
  {
    IndexedDatasetWriter w(dir.file("x"), TokenDType::uint16);
    const std::vector<int32_t> doc = {1, 2, 3};
    w.add_document(doc);
    EXPECT_FALSE(std::filesystem::exists(dir.file("x.bin")));  // only the temp file so far
  }
  EXPECT_TRUE(dir.list().empty());
  expect_error([&] { IndexedDatasetWriter(dir.file("no/such/folder/x"), TokenDType::uint16); },
               {"no/such/folder/x.bin.tmp"});
}

// Corruptions of a valid dataset: each must give an Error naming the file and the fault.
class IndexedDatasetCorrupt : public ::testing::Test {
 protected:
  void SetUp() override {
    prefix_ = dir_.file("c");
    idx_ = handmade_index();
    bin_ = handmade_bin();
  }
  void write() {
    test::write_bytes(prefix_ + ".idx", idx_.bytes());
    test::write_bytes(prefix_ + ".bin", bin_);
  }
  void expect_open_error(const std::vector<std::string>& parts) {
    expect_error([&] { IndexedDataset::open(prefix_); }, parts);
  }
  ScratchDir dir_;
  std::string prefix_;
  RawIndex idx_;
  std::vector<char> bin_;
};

TEST_F(IndexedDatasetCorrupt, MissingFiles) {
  expect_open_error({prefix_ + ".idx", "No such file"});
  test::write_bytes(prefix_ + ".idx", idx_.bytes());
  expect_open_error({prefix_ + ".bin", "No such file"});
}

TEST_F(IndexedDatasetCorrupt, TruncatedBin) {
  bin_.pop_back();  // the last token loses a byte
  write();
  expect_open_error({prefix_ + ".idx", prefix_ + ".bin", "sequence 1", "truncated"});
}

TEST_F(IndexedDatasetCorrupt, TruncatedIdx) {
  auto bytes = idx_.bytes();
  for (const size_t keep : {size_t{0}, size_t{20}, bytes.size() - 1, bytes.size() - 30}) {
    SCOPED_TRACE(keep);
    test::write_bytes(prefix_ + ".idx", std::vector<char>(bytes.begin(), bytes.begin() + keep));
    test::write_bytes(prefix_ + ".bin", bin_);
    expect_open_error({prefix_ + ".idx", "truncated"});
  }
}

TEST_F(IndexedDatasetCorrupt, HugeCountsDoNotOverflow) {
  auto bytes = idx_.bytes();
  for (const int at : {18, 26}) {  // sequence count, document count
    auto b = bytes;
    for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>(0xff);
    test::write_bytes(prefix_ + ".idx", b);
    test::write_bytes(prefix_ + ".bin", bin_);
    expect_open_error({prefix_ + ".idx", "truncated"});
  }
}

TEST_F(IndexedDatasetCorrupt, BadMagic) {
  idx_.magic = std::string("TNTIDX\0\0\0", 9);
  write();
  expect_open_error({prefix_ + ".idx", "MMIDIDX"});
}

TEST_F(IndexedDatasetCorrupt, BadVersion) {
  idx_.version = 2;
  write();
  expect_open_error({prefix_ + ".idx", "version 2"});
}

TEST_F(IndexedDatasetCorrupt, BadDtypeCode) {
  for (const uint8_t code : {uint8_t{0}, uint8_t{9}, uint8_t{255}}) {
    idx_.code = code;
    write();
    expect_open_error({prefix_ + ".idx", "dtype code " + std::to_string(code)});
  }
}

TEST_F(IndexedDatasetCorrupt, PointerOutOfRange) {
  idx_.pointers[2] = 24;  // 4 int32 tokens from byte 24 end at 40 > 36
  write();
  expect_open_error({"sequence 2", prefix_ + ".bin", "36 bytes"});
  idx_.pointers[2] = -8;
  write();
  expect_open_error({"sequence 2"});
}

TEST_F(IndexedDatasetCorrupt, NegativeLength) {
  idx_.lengths[0] = -3;
  write();
  expect_open_error({"sequence 0", "negative"});
}

TEST_F(IndexedDatasetCorrupt, BadDocumentIndices) {
  idx_.doc_indices = {0, 3, 2};
  write();
  expect_open_error({"document_indices[2]"});
  idx_.doc_indices = {1, 2, 3};
  write();
  expect_open_error({"document_indices[0]"});
  idx_.doc_indices = {0, 1, 2};
  write();
  expect_open_error({"last document index is 2", "3 sequences"});
}

TEST_F(IndexedDatasetCorrupt, TrailingGarbage) {
  auto bytes = idx_.bytes();
  bytes.insert(bytes.end(), 5, '\x01');
  test::write_bytes(prefix_ + ".idx", bytes);
  test::write_bytes(prefix_ + ".bin", bin_);
  expect_open_error({prefix_ + ".idx", "5 bytes after"});
}

TEST_F(IndexedDatasetCorrupt, NonIntegerFloatTokens) {
  ScratchDir& d = dir_;
  RawIndex r;
  r.code = 7;  // float32
  r.lengths = {2};
  r.pointers = {0};
  r.doc_indices = {0, 1};
  std::vector<char> bin;
  append_le(bin, 3.0f);
  append_le(bin, 2.5f);
  test::write_bytes(d.file("f.idx"), r.bytes());
  test::write_bytes(d.file("f.bin"), bin);
  const IndexedDataset ds = IndexedDataset::open(d.file("f"));
  EXPECT_EQ(ds.document_tokens(0, 1), (std::vector<int32_t>{3}));
  expect_error([&] { ds.document_tokens(0); }, {"document 0", "2.5"});
}

}  // namespace
}  // namespace infinipipe::data
