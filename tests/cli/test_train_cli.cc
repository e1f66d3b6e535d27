// `infinipipe train` as a user runs it: exit codes and messages. The binary is built with the
// whole project; a build of test_runtime alone does not make it, so these tests skip without it.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"

namespace {

namespace fs = std::filesystem;

class TrainCliTest : public CliDirTest {
 protected:
  std::string tiny() const {
    return "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
           "--global-batch-size 4 --min-tail-slice 32 ";
  }
};

TEST_F(TrainCliTest, WithoutDataPathExitsTwoSayingHowToMakeData) {
  const ShellResult r = run_cli("train " + tiny() + "--train-iters 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--data-path"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("infinipipe data synth"), std::string::npos) << r.output;
}

TEST_F(TrainCliTest, TrainsSavesAndRefusesADamagedCheckpoint) {
  const std::string corpus = (dir_ / "corpus").string();
  const std::string ck = (dir_ / "ck").string();
  ShellResult r =
      run_cli(fmt::format("data synth --num-documents 40 --seq-length 128 --output {}", corpus));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cli(fmt::format("train {} --train-iters 2 --data-path {} --save {}", tiny(), corpus, ck));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("iter 2/2"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "ck" / "metrics.jsonl"));

  const fs::path model = dir_ / "ck" / "iter_0000002" / "model.safetensors";
  ASSERT_TRUE(fs::exists(model));
  {
    std::fstream f(model, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(model) - 8));
    f.write("damage!", 7);
  }
  r = run_cli(fmt::format("train {} --train-iters 4 --data-path {} --load {}", tiny(), corpus, ck));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

TEST_F(TrainCliTest, PipelineParallelIsRefusedWithExitTwo) {
  const ShellResult r = run_cli("train " + tiny() + "--train-iters 1 --data-path x --pp 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("one process"), std::string::npos) << r.output;
}

}  // namespace
