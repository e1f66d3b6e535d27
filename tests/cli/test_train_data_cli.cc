// `infinipipe train` with Megatron's data flags as a user runs it: a blend cut by --split, the
// validation loss in the report and in metrics.jsonl on exactly the evaluated iterations, the
// final test loss, --train-samples, and one clear error (exit 2) for each malformed flag.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"

namespace {

namespace fs = std::filesystem;

class TrainDataCliTest : public CliDirTest {
 protected:
  std::string tiny() const {
    return "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 "
           "--global-batch-size 4 --min-tail-slice 32 --cost-model-update off ";
  }
  std::string corpus(const std::string& name, int seed) {
    const std::string p = (dir_ / name).string();
    const ShellResult r = run_cli(fmt::format(
        "data synth --num-documents 60 --seq-length 128 --seed {} --output {}", seed, p));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return p;
  }
  std::vector<nlohmann::json> metrics(const fs::path& file) const {
    std::vector<nlohmann::json> out;
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
};

TEST_F(TrainDataCliTest, BlendWithSplitEvaluatesOnTheIntervalAndTestsAtTheEnd) {
  const std::string a = corpus("a", 1), b = corpus("b", 2);
  const fs::path m = dir_ / "metrics.jsonl";
  const ShellResult r = run_cli(fmt::format(
      "train {} --train-iters 5 --data-path 0.3 {} 0.7 {} --split 80,10,10 --eval-interval 2 "
      "--eval-iters 2 --metrics {}",
      tiny(), a, b, m.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("valid loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("test loss"), std::string::npos) << r.output;
  const std::vector<nlohmann::json> recs = metrics(m);
  ASSERT_EQ(recs.size(), 5u);
  for (const nlohmann::json& j : recs) {
    const int64_t it = j.at("iteration").get<int64_t>();
    EXPECT_EQ(j.contains("valid_loss"), it % 2 == 0 || it == 5) << j.dump();
    EXPECT_EQ(j.contains("test_loss"), it == 5) << j.dump();
    if (j.contains("valid_loss")) {
      EXPECT_TRUE(j.at("valid_loss").is_number());
      EXPECT_GT(j.at("valid_loss").get<double>(), 0.0);
      EXPECT_GT(j.at("valid_tokens").get<int64_t>(), 0);
    }
  }
}

TEST_F(TrainDataCliTest, TrainSamplesSetsTheIterations) {
  const std::string a = corpus("a", 1);
  const ShellResult r = run_cli(
      fmt::format("train {} --train-samples 12 --lr-warmup-samples 4 --data-path {}", tiny(), a));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("iter 3/3"), std::string::npos) << r.output;
}

TEST_F(TrainDataCliTest, MalformedDataFlagsAreOneClearError) {
  const std::string a = corpus("a", 1);
  struct Case {
    std::string flags, says;
  };
  const std::vector<Case> cases = {
      {"--data-path 0.3 " + a + " 0.7", "the last weight has no prefix"},
      {"--data-path -0.3 " + a, "a finite number ≥ 0"},
      {"--data-path 0.5 0.5", "should be a dataset prefix"},
      {"--data-path " + a + " --split 9,x", "is not a weight"},
      {"--data-path " + a + " --train-data-path " + a, "not both"},
      {"--data-path " + a + " --train-samples 12", "only one of --train-iters"},
      {"--data-path " + a + " --lr-warmup-samples 8", "count samples"},
      {"--data-path " + a + " --eval-iters -1", "eval-iters must be an integer in [0, "},
      {"--data-path " + a + " --eval-interval 0", "eval-interval must be positive"},
  };
  for (const Case& c : cases) {
    const ShellResult r = run_cli("train " + tiny() + "--train-iters 2 " + c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.flags << "\n" << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  }
}

}  // namespace
