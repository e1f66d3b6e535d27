// The SentencePiece tokenizer types against the SentencePiece library itself, on a small model
// trained here with the library's own trainer (no downloads).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/sentencepiece_test_model.h"
#include "core/error.h"
#include "tokenize/tokenizer.h"
#include "tokenize/tokenizer_saved.h"
#include "tokenize/tokenizer_types.h"

namespace infinipipe::tokenize {
namespace {

using TokenizerTest = data::test::SentencePieceTest;

TEST_F(TokenizerTest, SentencePieceTypesEncodeAsTheLibrary) {
  const auto gpt = tokenizer_open("GPTSentencePieceTokenizer", model_);
  const auto llama = tokenizer_open("Llama2Tokenizer", model_);
  for (const std::string& line : data::test::sentencepiece_corpus_lines(50, 2)) {
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

// The types' table says which put bos first; the saved tokenizer_config.json says it as
// add_bos_token, as transformers reads it.
TEST_F(TokenizerTest, TheTableSaysWhichTypesPutBosFirst) {
  for (const TokenizerType& type : kTokenizerTypes) {
    if (type.file != TokenizerFile::sentencepiece_model) continue;
    const auto t = tokenizer_open(std::string(type.name), model_);
    const std::vector<int32_t> ids = t->encode("pipe line");
    EXPECT_EQ(!ids.empty() && ids.front() == sp_.bos_id(), type.bos_first) << type.name;
    EXPECT_EQ(tokenizer_saved_config(*t, 256)["add_bos_token"], type.bos_first) << type.name;
  }
}

TEST_F(TokenizerTest, BadTypesAndModelsAreConfigErrors) {
  EXPECT_THROW(tokenizer_open("HuggingFaceTokenizer", model_), ConfigError);
  EXPECT_THROW(tokenizer_open("Llama2Tokenizer", ""), ConfigError);
  EXPECT_THROW(tokenizer_open("Llama2Tokenizer", dir_.file("missing.model")), ConfigError);
  EXPECT_THROW(tokenizer_open("ByteTokenizer", model_), ConfigError);
}

}  // namespace
}  // namespace infinipipe::tokenize
