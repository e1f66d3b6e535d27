// `data prepare` with a SentencePiece tokenizer type, against the SentencePiece library itself,
// on a small model trained here with the library's own trainer (no downloads).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/data_test_util.h"
#include "common/sentencepiece_test_model.h"
#include "data/indexed_dataset.h"
#include "data/prepare.h"

namespace infinipipe::data {
namespace {

using TokenizerTest = test::SentencePieceTest;

// The prepared dataset holds the library's encoding of every document, and any worker count
// writes the same bytes.
TEST_F(TokenizerTest, PrepareWritesTheLibrarysTokensForAnyWorkerCount) {
  const std::vector<std::string> lines = test::sentencepiece_corpus_lines(700, 3);
  {
    std::ofstream in(dir_.file("in.jsonl"));
    for (const std::string& l : lines) in << "{\"text\": \"" << l << "\", \"title\": \"t\"}\n";
  }
  std::vector<std::vector<char>> outputs;
  for (int32_t workers : {1, 3}) {
    PrepareOptions o;
    o.input = dir_.file("in.jsonl");
    o.output_prefix = dir_.file("w" + std::to_string(workers));
    o.json_keys = {"text", "title"};
    o.tokenizer_type = "Llama2Tokenizer";
    o.tokenizer_model = model_;
    o.append_eod = true;
    o.workers = workers;
    const PrepareSummary s = prepare_jsonl(o);
    ASSERT_EQ(s.outputs.size(), 2u);
    EXPECT_EQ(s.outputs[0], o.output_prefix + "_text_document");
    EXPECT_EQ(s.documents, 2 * static_cast<int64_t>(lines.size()));
    const IndexedDataset ds = IndexedDataset::open(s.outputs[0]);
    ASSERT_EQ(ds.num_documents(), static_cast<int64_t>(lines.size()));
    for (size_t i = 0; i < lines.size(); i += 37) {
      std::vector<int32_t> want{sp_.bos_id()};
      const auto ids = library(lines[i]);
      want.insert(want.end(), ids.begin(), ids.end());
      want.push_back(sp_.eos_id());
      EXPECT_EQ(ds.document_tokens(static_cast<int64_t>(i)), want) << lines[i];
    }
    for (const char* ext : {".bin", ".idx"}) {
      outputs.push_back(test::read_bytes(s.outputs[0] + ext));
      outputs.push_back(test::read_bytes(s.outputs[1] + ext));
    }
  }
  ASSERT_EQ(outputs.size(), 8u);
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(outputs[k], outputs[k + 4]) << "output " << k;
}

}  // namespace
}  // namespace infinipipe::data
