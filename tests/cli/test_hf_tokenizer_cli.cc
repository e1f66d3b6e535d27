// HuggingFaceTokenizer from data to text through the real binary: a tokenizer.json folder (a small
// byte-level BPE built here) prepares data that records its tokenizer, a run with another
// tokenizer is refused naming both, a run with it trains and saves it, the export carries
// tokenizer.json byte for byte and the data's end of document, a run from the export takes its
// tokenizer unasked (unless a tokenizer flag is given), and generate uses it unasked.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"
#include "tokenize/hf_test_tokenizer.h"

namespace {

namespace fs = std::filesystem;

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class HfTokenizerCliTest : public CliDirTest {
 protected:
  void SetUp() override {
    CliDirTest::SetUp();
    tok_ = dir_ / "llama3-like";
    fs::create_directories(tok_);
    std::ofstream(tok_ / "tokenizer.json")
        << infinipipe::tokenize::test::hf_byte_level_json().dump();
    std::ofstream(tok_ / "tokenizer_config.json")
        << infinipipe::tokenize::test::hf_byte_level_config();
    std::ofstream j(dir_ / "docs.jsonl");
    for (int i = 0; i < 60; ++i) {
      j << nlohmann::json{{"text", fmt::format("the pipe {} plans the pipes", i % 7)}}.dump()
        << "\n";
    }
  }
  fs::path tok_;
};

TEST_F(HfTokenizerCliTest, PrepareTrainExportGenerate) {
  const std::string tok =
      "--tokenizer-type HuggingFaceTokenizer --tokenizer-model " + tok_.string();
  ShellResult r =
      run_cli(fmt::format("data prepare --input {} --output-prefix {} {} --append-eod",
                          (dir_ / "docs.jsonl").string(), (dir_ / "data").string(), tok));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("vocabulary 302 (HuggingFaceTokenizer)"), std::string::npos) << r.output;
  const std::string data = (dir_ / "data_text_document").string();
  const nlohmann::json info = nlohmann::json::parse(file_text(data + ".tokenizer_info.json"));
  EXPECT_EQ(info.at("tokenizer_type"), "HuggingFaceTokenizer");
  EXPECT_EQ(info.at("vocab_size"), 302);
  EXPECT_EQ(info.at("eod"), 301);

  const std::string shape =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --vocab-size 320 --seq-length 32 "
      "--global-batch-size 4 --lr 3e-3";
  // The default byte tokenizer is not the data's: refused, naming both.
  r = run_cli(fmt::format("train {} --data-path {} --train-iters 1", shape, data));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("prepared with HuggingFaceTokenizer"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ByteTokenizer (vocabulary 257)"), std::string::npos) << r.output;

  r = run_cli(fmt::format("train {} {} --data-path {} --train-iters 2 --save {}", shape, tok, data,
                          (dir_ / "ck").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  r = run_cli(
      fmt::format("checkpoint export {} {}", (dir_ / "ck").string(), (dir_ / "hf").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(file_text(dir_ / "hf" / "tokenizer.json"), file_text(tok_ / "tokenizer.json"));
  const nlohmann::json config = nlohmann::json::parse(file_text(dir_ / "hf" / "config.json"));
  EXPECT_EQ(config.at("eos_token_id"), 301) << config.dump();
  EXPECT_EQ(config.at("bos_token_id"), 300) << config.dump();
  const nlohmann::json tc = nlohmann::json::parse(file_text(dir_ / "hf" / "tokenizer_config.json"));
  EXPECT_EQ(tc.at("infinipipe_tokenizer_type"), "HuggingFaceTokenizer");
  EXPECT_EQ(tc.at("eos_token"), "<|end_of_text|>");

  // A new run from the exported Hugging Face folder (the README's chain) takes the folder's
  // tokenizer without flags: the data's record agrees, and the new checkpoint records it.
  r = run_cli(fmt::format(
      "train --load {} --data-path {} --seq-length 32 --global-batch-size 4 --train-iters 1 "
      "--save {}",
      (dir_ / "hf").string(), data, (dir_ / "ck2").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  EXPECT_EQ(file_text(dir_ / "ck2" / "iter_0000001" / "tokenizer.json"),
            file_text(tok_ / "tokenizer.json"));
  // The checkpoint carries its tokenizer: generate needs no tokenizer flags.
  r = run_cli(fmt::format("generate --load {} --prompt 'the pipe' --max-new-tokens 6 --greedy",
                          (dir_ / "ck2").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("the pipe", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("tokenizer HuggingFaceTokenizer"), std::string::npos) << r.output;
}

// --load of a folder with a tokenizer.json takes it only while no tokenizer flag is given: an
// explicit --tokenizer-type ByteTokenizer (the default's name) wins, trains on byte data and
// is what the new checkpoint records; `config show` prints the tokenizer each run uses.
TEST_F(HfTokenizerCliTest, ExplicitByteTokenizerOverridesTheLoadFolders) {
  const std::string tok =
      "--tokenizer-type HuggingFaceTokenizer --tokenizer-model " + tok_.string();
  const std::string docs = (dir_ / "docs.jsonl").string();
  ShellResult r = run_cli(fmt::format("data prepare --input {} --output-prefix {} {}", docs,
                                      (dir_ / "hfdata").string(), tok));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cli(
      fmt::format("data prepare --input {} --output-prefix {}", docs, (dir_ / "bytes").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string shape =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --vocab-size 320 --seq-length 32 "
      "--global-batch-size 4 --lr 3e-3";
  r = run_cli(fmt::format("train {} {} --data-path {} --train-iters 1 --save {}", shape, tok,
                          (dir_ / "hfdata_text_document").string(), (dir_ / "ck").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path hf = dir_ / "hf";
  r = run_cli(fmt::format("checkpoint export {} {}", (dir_ / "ck").string(), hf.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(fs::exists(hf / "tokenizer.json"));

  const std::string bytes = (dir_ / "bytes_text_document").string();
  const std::string from_hf =
      fmt::format("--load {} --data-path {} --seq-length 32 --global-batch-size 4 --train-iters 1",
                  hf.string(), bytes);
  // No flag: the folder's tokenizer, which the byte data was not prepared with.
  r = run_cli("train " + from_hf);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("prepared with ByteTokenizer (vocabulary 257), but this run's "
                          "tokenizer is HuggingFaceTokenizer"),
            std::string::npos)
      << r.output;
  r = run_cli("config show " + from_hf);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tokenizer-type: \"HuggingFaceTokenizer\""), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(fmt::format("tokenizer-model: \"{}\"", hf.string())), std::string::npos)
      << r.output;

  // The flag given wins: byte data trains, and the checkpoint records the byte tokenizer.
  r = run_cli(fmt::format("train {} --tokenizer-type ByteTokenizer --save {}", from_hf,
                          (dir_ / "ck2").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path saved = dir_ / "ck2" / "iter_0000001";
  const nlohmann::json tc = nlohmann::json::parse(file_text(saved / "tokenizer_config.json"));
  EXPECT_EQ(tc.at("infinipipe_tokenizer_type"), "ByteTokenizer") << tc.dump();
  EXPECT_FALSE(fs::exists(saved / "tokenizer.json"));
  r = run_cli("config show --tokenizer-type ByteTokenizer " + from_hf);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tokenizer-type: \"ByteTokenizer\""), std::string::npos) << r.output;
  // The same in a --config file: given is given, wherever it is written.
  std::ofstream(dir_ / "byte.yaml") << "tokenizer-type: ByteTokenizer\n";
  r = run_cli(fmt::format("train {} --config {}", from_hf, (dir_ / "byte.yaml").string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // Nothing anywhere: the byte tokenizer, printed by name.
  r = run_cli("config show");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tokenizer-type: \"ByteTokenizer\""), std::string::npos) << r.output;
}

TEST_F(HfTokenizerCliTest, BadTokenizerFilesAreUsageErrors) {
  std::ofstream(dir_ / "docs2.jsonl") << "{\"text\": \"x\"}\n";
  auto prepare = [&](const fs::path& model) {
    return run_cli(
        fmt::format("data prepare --input {} --output {} --tokenizer-type HuggingFaceTokenizer "
                    "--tokenizer-model {}",
                    (dir_ / "docs2.jsonl").string(), (dir_ / "out").string(), model.string()));
  };
  ShellResult r = prepare(dir_ / "missing");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  fs::create_directories(dir_ / "empty");
  r = prepare(dir_ / "empty");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("has no tokenizer.json"), std::string::npos) << r.output;
  nlohmann::json j = infinipipe::tokenize::test::hf_byte_level_json();
  j["model"]["type"] = "Unigram";
  std::ofstream(tok_ / "tokenizer.json") << j.dump();
  r = prepare(tok_);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("\"Unigram\" is not supported"), std::string::npos) << r.output;
  std::ofstream(tok_ / "tokenizer.json") << "{\"model\": [";
  r = prepare(tok_ / "tokenizer.json");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("not valid JSON"), std::string::npos) << r.output;
}

}  // namespace
