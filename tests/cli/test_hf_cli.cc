// Hugging Face folders as a user meets them: `checkpoint export` writes one (and refuses a
// folder that is not empty), `train --load` of it takes the model from its config.json, and
// model flags that contradict that config are one error with exit code 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"

namespace {

namespace fs = std::filesystem;

class HfCliTest : public CliDirTest {};

TEST_F(HfCliTest, ExportThenTrainFromTheExportedFolder) {
  const std::string corpus = (dir_ / "corpus").string(), ck = (dir_ / "ck").string();
  const std::string out = (dir_ / "hf").string();
  const std::string batch = "--global-batch-size 4 --min-tail-slice 32 ";
  ShellResult r =
      run_cli(fmt::format("data synth --num-documents 40 --seq-length 128 --output {}", corpus));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cli(fmt::format(
      "train --num-layers 2 --hidden-size 64 --num-attention-heads 4 --num-query-groups 2 "
      "--seq-length 128 {} --train-iters 1 --data-path {} --save {}",
      batch, corpus, ck));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  r = run_cli(fmt::format("checkpoint export {} {} --dtype bf16", ck, out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("iteration 1"), std::string::npos) << r.output;
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(dir_ / "hf" / "config.json"));
  EXPECT_EQ(config.at("torch_dtype"), "bfloat16");
  EXPECT_TRUE(fs::exists(dir_ / "hf" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir_ / "hf" / "tokenizer_config.json"));
  r = run_cli(fmt::format("checkpoint export {} {}", ck, out));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is not empty"), std::string::npos) << r.output;

  // The folder defines the model: no model flags needed, contradicting ones refused.
  r = run_cli(fmt::format("train {} --train-iters 1 --data-path {} --load {}", batch, corpus, out));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("training 2 layers x hidden 64"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("started from the weights of"), std::string::npos) << r.output;
  r =
      run_cli(fmt::format("train {} --train-iters 1 --data-path {} --pretrained-checkpoint {} "
                          "--hidden-size 128 --num-layers 2",
                          batch, corpus, out));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("contradict it: checkpoint has hidden-size 64, this run has 128"),
            std::string::npos)
      << r.output;
}

}  // namespace
