// The tokenizers of `data prepare` against the SentencePiece library itself, on a small model
// trained here with the library's own trainer (no downloads).
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/indexed_dataset.h"
#include "data/prepare.h"
#include "data/rng.h"
#include "data/tokenizer.h"
#include "data_test_util.h"

namespace infinipipe::data {
namespace {

// Lines of made-up words, so the model learns pieces longer than one character.
std::vector<std::string> corpus_lines(int n, uint64_t seed) {
  const std::vector<std::string> words{"pipe",   "line",      "stage", "slice", "chunk", "token",
                                       "packed", "recompute", "über",  "naïve", "42",    "the"};
  Rng rng(seed);
  std::vector<std::string> lines;
  for (int i = 0; i < n; ++i) {
    std::string s;
    const int64_t len = rng.range(1, 12);
    for (int64_t w = 0; w < len; ++w) {
      if (w > 0) s += rng.range(0, 5) == 0 ? ", " : " ";
      s += words[static_cast<size_t>(rng.range(0, static_cast<int64_t>(words.size()) - 1))];
    }
    lines.push_back(s);
  }
  return lines;
}

class TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string text = dir_.file("train.txt");
    std::ofstream out(text);
    for (const std::string& l : corpus_lines(400, 1)) out << l << "\n";
    out.close();
    model_ = dir_.file("m.model");
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + text + " --model_prefix=" + dir_.file("m") +
        " --vocab_size=48 --hard_vocab_limit=false --model_type=unigram --character_coverage=1.0 "
        "--num_threads=1"
        " --minloglevel=2");
    ASSERT_TRUE(status.ok()) << status.ToString();
    ASSERT_TRUE(sp_.Load(model_).ok());
  }
  std::vector<int32_t> library(const std::string& text) const {
    std::vector<int> ids;
    EXPECT_TRUE(sp_.Encode(text, &ids).ok());
    return {ids.begin(), ids.end()};
  }

  test::ScratchDir dir_;
  std::string model_;
  sentencepiece::SentencePieceProcessor sp_;
};

TEST_F(TokenizerTest, SentencePieceTypesEncodeAsTheLibrary) {
  const auto gpt = tokenizer_open("GPTSentencePieceTokenizer", model_);
  const auto llama = tokenizer_open("Llama2Tokenizer", model_);
  for (const std::string& line : corpus_lines(50, 2)) {
    const std::vector<int32_t> ids = library(line);
    EXPECT_EQ(gpt->encode(line), ids) << line;
    std::vector<int32_t> with_bos{sp_.bos_id()};
    with_bos.insert(with_bos.end(), ids.begin(), ids.end());
    EXPECT_EQ(llama->encode(line), with_bos) << line;
    EXPECT_EQ(gpt->decode(ids), line);
  }
  EXPECT_EQ(gpt->vocab_size(), sp_.GetPieceSize());
  EXPECT_EQ(gpt->eod(), sp_.eos_id());
  EXPECT_EQ(llama->eod(), sp_.eos_id());
  EXPECT_EQ(llama->bos(), sp_.bos_id());
}

// Megatron's SentencePieceTokenizer: <CLS> <SEP> <EOD> <MASK> <PAD> are not pieces of this model
// (pad_id is -1), so they follow its vocabulary in that order; <s> and </s> are its own pieces.
TEST_F(TokenizerTest, MegatronSpecialTokensAreAddedAndCutFromTheText) {
  const auto t = tokenizer_open("SentencePieceTokenizer", model_);
  const int32_t n = sp_.GetPieceSize();
  EXPECT_EQ(t->vocab_size(), n + 5);
  EXPECT_EQ(t->eod(), n + 2);
  EXPECT_EQ(t->bos(), sp_.bos_id());
  EXPECT_EQ(t->eos(), sp_.eos_id());
  std::vector<int32_t> want = library("pipe line");
  want.push_back(n + 2);
  const auto tail = library(" stage");
  want.insert(want.end(), tail.begin(), tail.end());
  want.push_back(sp_.eos_id());
  EXPECT_EQ(t->encode("pipe line<EOD> stage</s>"), want);
  EXPECT_EQ(t->decode(t->encode("slice<EOD>chunk")), "slice<EOD>chunk");
  EXPECT_EQ(t->encode("token"), library("token"));
}

TEST_F(TokenizerTest, BadTypesAndModelsAreConfigErrors) {
  EXPECT_THROW(tokenizer_open("HuggingFaceTokenizer", model_), ConfigError);
  EXPECT_THROW(tokenizer_open("Llama2Tokenizer", ""), ConfigError);
  EXPECT_THROW(tokenizer_open("Llama2Tokenizer", dir_.file("missing.model")), ConfigError);
  EXPECT_THROW(tokenizer_open("ByteTokenizer", model_), ConfigError);
}

// The prepared dataset holds the library's encoding of every document, and any worker count
// writes the same bytes.
TEST_F(TokenizerTest, PrepareWritesTheLibrarysTokensForAnyWorkerCount) {
  const std::vector<std::string> lines = corpus_lines(700, 3);
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
