// The README's walk-through as one user runs it, through the real binary: text tokenized with a
// SentencePiece model (trained here with the library's own trainer), a model trained on it,
// exported as a Hugging Face folder, a new run started from that folder, and text generated
// from the result with the tokenizer the checkpoint carries.
#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"

namespace {

namespace fs = std::filesystem;

class WalkthroughCliTest : public CliDirTest {
 protected:
  // A JSON-lines corpus and a SentencePiece model trained on its text.
  std::string corpus_and_tokenizer() {
    const fs::path text = dir_ / "text.txt", jsonl = dir_ / "docs.jsonl";
    std::ofstream t(text), j(jsonl);
    for (int i = 0; i < 200; ++i) {
      const std::string line =
          fmt::format("the pipeline plans batch {} afresh and packs the short ones", i % 13);
      t << line << "\n";
      j << nlohmann::json{{"text", line}}.dump() << "\n";
    }
    t.close();
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + text.string() + " --model_prefix=" + (dir_ / "sp").string() +
        " --vocab_size=48 --hard_vocab_limit=false --model_type=unigram --num_threads=1 "
        "--minloglevel=2");
    EXPECT_TRUE(status.ok()) << status.ToString();
    return (dir_ / "sp.model").string();
  }
};

TEST_F(WalkthroughCliTest, SentencePieceDataTrainExportLoadAndGenerate) {
  const std::string model = corpus_and_tokenizer();
  const std::string tok = "--tokenizer-type SentencePieceTokenizer --tokenizer-model " + model;
  ShellResult r =
      run_cli(fmt::format("data prepare --input {} --output-prefix {} {} --append-eod",
                          (dir_ / "docs.jsonl").string(), (dir_ / "data").string(), tok));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string data = (dir_ / "data_text_document").string();
  ASSERT_TRUE(fs::exists(data + ".idx")) << r.output;

  const std::string shape =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --num-query-groups 2 "
      "--vocab-size 64 --seq-length 64 --global-batch-size 4 --lr 3e-3";
  r = run_cli(fmt::format("train {} {} --data-path {} --train-iters 3 --save {}", shape, tok, data,
                          (dir_ / "ck").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  r = run_cli(
      fmt::format("checkpoint export {} {}", (dir_ / "ck").string(), (dir_ / "hf").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "hf" / "tokenizer.model"));
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(dir_ / "hf" / "config.json"));
  // Documents end with Megatron's <EOD>, so generation stops there as well as at eos.
  EXPECT_TRUE(config.at("eos_token_id").is_array()) << config.dump();
  EXPECT_EQ(config.at("eos_token_id").size(), 2u) << config.dump();

  // A new run from the Hugging Face folder: the folder defines the model, so no model flags.
  r = run_cli(fmt::format(
      "train --load {} {} --data-path {} --seq-length 64 --global-batch-size 4 --train-iters 1 "
      "--save {}",
      (dir_ / "hf").string(), tok, data, (dir_ / "ck2").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // The checkpoint carries its tokenizer: generate needs no tokenizer flags.
  r = run_cli(fmt::format("generate --load {} --prompt 'the pipeline' --max-new-tokens 8 --greedy",
                          (dir_ / "ck2").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("the pipeline", 0), 0u) << r.output;
}

}  // namespace
