// `infinipipe generate` as a user runs it, on a checkpoint `train --save` wrote: the text is
// repeatable, the same with and without the K/V cache, the saved tokenizer is read, and every
// bad input is one clear error with exit code 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"

namespace {

namespace fs = std::filesystem;

class GenerateCliTest : public CliDirTest {
 protected:
  void SetUp() override {
    CliDirTest::SetUp();
    ckpt_ = (dir_ / "ckpt").string();
    const std::string corpus = (dir_ / "corpus").string();
    ShellResult r =
        run_cli(fmt::format("data synth --num-documents 40 --seq-length 128 --output {}", corpus));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_cli(fmt::format(
        "train --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
        "--global-batch-size 4 --min-tail-slice 32 --train-iters 2 --data-path {} --save {}",
        corpus, ckpt_));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  // What generate printed to the terminal before its closing summary line.
  static std::string text_of(const ShellResult& r) {
    const size_t end = r.output.rfind("\ngenerate: ");
    return end == std::string::npos ? "(no summary line) " + r.output : r.output.substr(0, end);
  }

  ShellResult generate(const std::string& flags) const {
    return run_cli(fmt::format("generate --load {} {}", ckpt_, flags));
  }

  std::string ckpt_;
};

TEST_F(GenerateCliTest, GreedyTextIsRepeatableAndTheSameWithoutTheCache) {
  const ShellResult a = generate("--prompt 'the ' --max-new-tokens 30 --greedy");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output.rfind("the ", 0), 0u) << "the prompt comes first: " << a.output;
  EXPECT_GT(text_of(a).size(), 4u);
  EXPECT_NE(a.output.find("K/V cache, tokenizer ByteTokenizer"), std::string::npos) << a.output;
  EXPECT_EQ(text_of(generate("--prompt 'the ' --max-new-tokens 30 --greedy")), text_of(a));
  const ShellResult uncached =
      generate("--prompt 'the ' --max-new-tokens 30 --greedy --no-kv-cache");
  ASSERT_EQ(uncached.exit_code, 0) << uncached.output;
  EXPECT_EQ(text_of(uncached), text_of(a));
  EXPECT_EQ(text_of(generate("--prompt 'the ' --max-new-tokens 30 --top-k 1 --seed 9")),
            text_of(a));
}

TEST_F(GenerateCliTest, ASeedRepeatsItsTextAndThePromptFileIsThePrompt) {
  const std::string flags = "--max-new-tokens 40 --temperature 1.2 --top-p 0.98 --seed 7";
  const ShellResult a = generate("--prompt 'of the' " + flags);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(text_of(generate("--prompt 'of the' " + flags)), text_of(a));
  EXPECT_NE(text_of(generate("--prompt 'of the' " + flags + " --seed 8")), text_of(a));
  std::ofstream((dir_ / "prompt.txt").string()) << "of the";
  EXPECT_EQ(
      text_of(generate(fmt::format("--prompt-file {} {}", (dir_ / "prompt.txt").string(), flags))),
      text_of(a));
}

TEST_F(GenerateCliTest, TheTokenizerSavedWithTheCheckpointIsUsed) {
  const fs::path config = fs::path(ckpt_) / "iter_0000002" / "tokenizer_config.json";
  std::ifstream in(config.string());
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("ByteTokenizer"), std::string::npos)
      << text.str();
  ShellResult r = generate("--prompt 'the ' --max-new-tokens 4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // The flags override what is saved.
  r = generate("--prompt 'the ' --max-new-tokens 4 --tokenizer-type SentencePieceTokenizer");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--tokenizer-model"), std::string::npos) << r.output;
  // The saved file is checksummed with the weights: an edited one is refused, not trusted.
  std::ofstream(config.string()) << R"({"infinipipe_tokenizer_type": "SentencePieceTokenizer"})";
  r = generate("--prompt 'the ' --max-new-tokens 4");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

TEST_F(GenerateCliTest, BadInputsAreOneClearErrorEach) {
  const auto expect_error = [&](const ShellResult& r, const std::string& says) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  };
  expect_error(run_cli(fmt::format("generate --load {} --prompt x", (dir_ / "none").string())),
               "no complete checkpoint there");
  expect_error(generate("--prompt " + std::string(200, 'a')),
               "the prompt is 200 tokens, but the model of");
  expect_error(generate("--prompt x --temperature -1"), "--temperature -1 must be");
  expect_error(generate("--prompt x --top-p 0"), "--top-p 0 must lie in (0, 1]");
  expect_error(generate("--prompt x --top-p 1.5"), "--top-p 1.5 must lie in (0, 1]");
  expect_error(generate("--prompt x --top-k -3"), "--top-k -3 must be");
  expect_error(generate("--prompt x --max-new-tokens 0"), "--max-new-tokens 0 must be");
  expect_error(generate(""), "exactly one of --prompt TEXT or --prompt-file FILE");
  expect_error(generate("--prompt x --prompt-file y"), "exactly one of --prompt");
  expect_error(generate("--prompt-file /nonexistent/p.txt"), "cannot be read");
  expect_error(generate("--prompt x --tokenizer-model m.model"), "needs --tokenizer-type too");
  expect_error(generate("--prompt x --tokenizer-type Nope"), "--tokenizer-type Nope is not");
  expect_error(generate("--prompt x --greedy --top-p 0.9"),
               "--top-p only applies to sampling, and --greedy picks the most likely token");
  expect_error(generate("--prompt x --greedy --temperature 0.7"), "--temperature only applies");
  expect_error(generate("--prompt x --temperature 0 --seed 3"),
               "--seed only applies to sampling, and --temperature 0 picks");
}

}  // namespace
