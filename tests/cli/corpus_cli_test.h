// Fixture of the CLI tests that train through the binary on a small synthetic corpus (40
// documents of up to 128 tokens in dir_/corpus), with the shared helpers they read results with.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"

inline nlohmann::json json_read(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

inline std::string text_of(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Whether `program` is on the PATH (Chromium checks are skipped without it).
inline bool have(const std::string& program) {
  return std::system(fmt::format("command -v {} >/dev/null 2>&1", program).c_str()) == 0;
}

class CorpusCliTest : public CliDirTest {
 protected:
  void SetUp() override {
    CliDirTest::SetUp();
    const ShellResult r = run_cli(fmt::format(
        "data synth --num-documents 40 --seq-length 128 --output {}", (dir_ / "corpus").string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  // A tiny model on the corpus.
  std::string corpus_args() const {
    return fmt::format(
        "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
        "--global-batch-size 4 --min-tail-slice 32 --data-path {}",
        (dir_ / "corpus").string());
  }
  // The tiny model training `iters` iterations on the corpus.
  std::string corpus_train_args(int iters) const {
    return fmt::format("{} --train-iters {}", corpus_args(), iters);
  }
};
