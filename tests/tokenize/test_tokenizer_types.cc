// The table of tokenizer types (tokenize/tokenizer_types.h): every row opens a tokenizer of its
// own name, reads the file it says a checkpoint saves, shows in every help text, and at most one
// row claims any plain Hugging Face folder.
#include <gtest/gtest.h>

#include <string>

#include "common/data_test_util.h"
#include "common/sentencepiece_test_model.h"
#include "core/error.h"
#include "hf_test_tokenizer.h"
#include "tokenize/tokenizer_saved.h"
#include "tokenize/tokenizer_types.h"

namespace infinipipe::tokenize {
namespace {

class TokenizerTypes : public ::testing::Test {
 protected:
  // What --tokenizer-model names for a row of `file`, made in the test's folder.
  std::string model_for(TokenizerFile file) {
    switch (file) {
      case TokenizerFile::none:
        return "";
      case TokenizerFile::sentencepiece_model:
        return data::test::sentencepiece_test_model_train(dir_.file("m"));
      case TokenizerFile::hf_tokenizer_json:
        data::test::write_text(dir_.file("tokenizer.json"), test::hf_byte_level_json().dump());
        data::test::write_text(dir_.file("tokenizer_config.json"), test::hf_byte_level_config());
        return dir_.file("tokenizer.json");
    }
    return "";
  }
  data::test::ScratchDir dir_;
};

TEST_F(TokenizerTypes, EveryRowOpensATokenizerOfItsNameFromItsFile) {
  for (const TokenizerType& row : kTokenizerTypes) {
    SCOPED_TRACE(std::string(row.name));
    const std::string model = model_for(row.file);
    const auto t = tokenizer_open(std::string(row.name), model);
    EXPECT_EQ(t->type(), row.name);
    EXPECT_GT(t->vocab_size(), 0);
    EXPECT_EQ(tokenizer_type_find(row.name), &row);
    // A checkpoint saves exactly the file the row reads.
    EXPECT_EQ(tokenizer_type_has_model(std::string(row.name)),
              row.file == TokenizerFile::sentencepiece_model);
    EXPECT_EQ(tokenizer_type_has_json(std::string(row.name)),
              row.file == TokenizerFile::hf_tokenizer_json);
    // A row that reads no file refuses one; one that reads a file needs it.
    if (row.file == TokenizerFile::none) {
      EXPECT_THROW(tokenizer_open(std::string(row.name), dir_.file("some.model")), ConfigError);
    } else {
      EXPECT_THROW(tokenizer_open(std::string(row.name), dir_.file("missing")), ConfigError);
    }
  }
  EXPECT_NE(tokenizer_type_find(kDefaultTokenizerType), nullptr);
}

TEST_F(TokenizerTypes, HelpAndErrorsNameEveryRow) {
  const std::string names(tokenizer_types_text<TokenizerTypesText::names>());
  const std::string with_help(tokenizer_types_text<TokenizerTypesText::with_help>());
  const std::string model_file(tokenizer_types_text<TokenizerTypesText::model_file>());
  std::string unknown;
  try {
    tokenizer_open("NoSuchTokenizer", "");
  } catch (const ConfigError& e) {
    unknown = e.what();
  }
  for (const TokenizerType& row : kTokenizerTypes) {
    const std::string name(row.name);
    EXPECT_NE(names.find(name), std::string::npos) << names;
    EXPECT_NE(with_help.find(name + " (" + std::string(row.help) + ")"), std::string::npos);
    EXPECT_EQ(model_file.find(name + ": ") != std::string::npos, row.file != TokenizerFile::none)
        << model_file;
    EXPECT_NE(unknown.find(name), std::string::npos) << unknown;
  }
  EXPECT_EQ(names.find("ByteTokenizer | SentencePieceTokenizer"), 0u) << names;
}

TEST_F(TokenizerTypes, AtMostOneRowClaimsAPlainHuggingFaceFolder) {
  const auto claims = [](const SavedFolder& f) {
    std::string out;
    for (const TokenizerType& row : kTokenizerTypes)
      if (row.detect != nullptr && row.detect(f))
        out += std::string(out.empty() ? "" : " ") + std::string(row.name);
    return out;
  };
  EXPECT_EQ(claims({"LlamaTokenizer", false}), "Llama2Tokenizer");
  EXPECT_EQ(claims({"LlamaTokenizerFast", false}), "Llama2Tokenizer");
  EXPECT_EQ(claims({"LlamaTokenizer", true}), "HuggingFaceTokenizer");
  EXPECT_EQ(claims({"PreTrainedTokenizerFast", true}), "HuggingFaceTokenizer");
  EXPECT_EQ(claims({"GPT2Tokenizer", false}), "");
  EXPECT_EQ(claims({"", false}), "");
}

}  // namespace
}  // namespace infinipipe::tokenize
