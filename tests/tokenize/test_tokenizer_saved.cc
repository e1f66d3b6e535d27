// The tokenizer saved with a checkpoint: tokenizer_config.json names the type, tokenizer.model
// holds a SentencePiece model; no file means the byte tokenizer of every older checkpoint.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/data_test_util.h"
#include "core/error.h"
#include "tokenize/tokenizer_saved.h"

namespace infinipipe::tokenize {
namespace {

namespace fs = std::filesystem;

class TokenizerSaved : public ::testing::Test {
 protected:
  void write_config(const std::string& text) const {
    std::ofstream(dir_.file(kTokenizerConfigFile)) << text;
  }
  std::string error_of() const {
    try {
      tokenizer_open_saved(dir());
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no ConfigError)";
  }
  data::test::ScratchDir dir_;
  std::string dir() const { return fs::path(dir_.file("x")).parent_path().string(); }
};

TEST_F(TokenizerSaved, WithoutAConfigItIsTheByteTokenizer) {
  const auto t = tokenizer_open_saved(dir());
  EXPECT_EQ(t->type(), "ByteTokenizer");
  EXPECT_EQ(t->vocab_size(), 257);
}

TEST_F(TokenizerSaved, APlainHuggingFaceLlamaFolderIsLlama2) {
  write_config(R"({"tokenizer_class": "LlamaTokenizer"})");
  EXPECT_NE(error_of().find("names Llama2Tokenizer, but"), std::string::npos) << error_of();
}

TEST_F(TokenizerSaved, TheConfigNamesTheType) {
  write_config(R"({"infinipipe_tokenizer_type": "ByteTokenizer", "model_max_length": 128})");
  EXPECT_EQ(tokenizer_open_saved(dir())->type(), "ByteTokenizer");
}

TEST_F(TokenizerSaved, ASentencePieceTypeNeedsItsModelFile) {
  write_config(R"({"infinipipe_tokenizer_type": "Llama2Tokenizer"})");
  EXPECT_NE(error_of().find("names Llama2Tokenizer, but"), std::string::npos) << error_of();
  EXPECT_NE(error_of().find("tokenizer.model is missing"), std::string::npos);
  std::ofstream(dir_.file(kTokenizerModelFile)) << "not a sentencepiece model";
  EXPECT_NE(error_of().find("tokenizer_config.json"), std::string::npos) << error_of();
}

TEST_F(TokenizerSaved, ABadConfigIsAClearError) {
  write_config("{not json");
  EXPECT_NE(error_of().find("is not valid JSON"), std::string::npos) << error_of();
  write_config(R"({"tokenizer_class": "GPT2Tokenizer"})");
  EXPECT_NE(error_of().find("names no infinipipe_tokenizer_type"), std::string::npos) << error_of();
  write_config(R"({"infinipipe_tokenizer_type": "Nope"})");
  EXPECT_NE(error_of().find("Nope"), std::string::npos) << error_of();
  EXPECT_NE(error_of().find("--tokenizer-type"), std::string::npos) << error_of();
}

// The saved files are checked by core/input_file.h: a FIFO, a link or an oversized file is one
// clear ConfigError at once, never a wait for a writer or a read of gigabytes.
TEST_F(TokenizerSaved, ItsFilesGoThroughTheBoundedReader) {
  ASSERT_EQ(::mkfifo(dir_.file(kTokenizerConfigFile).c_str(), 0600), 0);
  EXPECT_NE(error_of().find("tokenizer_config.json is a FIFO (named pipe), not a regular file"),
            std::string::npos)
      << error_of();
  fs::remove(dir_.file(kTokenizerConfigFile));
  write_config(R"({"infinipipe_tokenizer_type": "Llama2Tokenizer"})");
  std::ofstream(dir_.file("elsewhere.model")) << "a model";
  fs::create_symlink(dir_.file("elsewhere.model"), dir_.file(kTokenizerModelFile));
  EXPECT_NE(error_of().find("tokenizer.model is a symbolic link"), std::string::npos) << error_of();
  EXPECT_NE(error_of().find("(cp -rL)"), std::string::npos) << error_of();
  // Sparse: past the bound without using the disk.
  fs::resize_file(dir_.file(kTokenizerConfigFile), (int64_t{16} << 20) + 1);
  EXPECT_NE(error_of().find("more than the 16 MiB a tokenizer config may be"), std::string::npos)
      << error_of();
}

}  // namespace
}  // namespace infinipipe::tokenize
