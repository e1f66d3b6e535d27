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

// The refit is on by default and leaves what it learned next to the checkpoints, where
// --calibration reads it back; off leaves nothing; another word is a usage error.
TEST_F(TrainCliTest, CostModelUpdateLeavesACalibrationForTheNextRun) {
  const std::string corpus = (dir_ / "corpus").string();
  ShellResult r =
      run_cli(fmt::format("data synth --num-documents 40 --seq-length 128 --output {}", corpus));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string online = (dir_ / "online").string(), off = (dir_ / "off").string();
  r = run_cli(
      fmt::format("train {} --train-iters 2 --data-path {} --save {}", tiny(), corpus, online));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path cal = dir_ / "online" / "calibration.json";
  ASSERT_TRUE(fs::exists(cal)) << r.output;
  r = run_cli(fmt::format("train {} --train-iters 1 --data-path {} --save {} --calibration {}",
                          tiny(), corpus, (dir_ / "next").string(), cal.string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_cli(
      fmt::format("train {} --train-iters 1 --data-path {} --save {} --cost-model-update off",
                  tiny(), corpus, off));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "off" / "calibration.json"));
  r = run_cli("train " + tiny() + "--train-iters 1 --data-path x --cost-model-update sometimes");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("cost-model-update 'sometimes' is not one of: online, off"),
            std::string::npos)
      << r.output;
}

TEST_F(TrainCliTest, PipelineParallelIsRefusedWithExitTwo) {
  const ShellResult r = run_cli("train " + tiny() + "--train-iters 1 --data-path x --pp 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("one process"), std::string::npos) << r.output;
}

}  // namespace
