// The sample `train --pp auto` searches layouts on: the run's own first batches, as the trainer
// draws them (train_search_batches, data/training_batches.h): a fresh run's and a resumed run's
// batches equal the ones train then trains (its metrics), and with --split they are
// TrainingBatches' batches for the same flags; --outlier-delay is refused with an auto degree.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "options/options.h"
#include "cli/run_cli.h"
#include "common/test_temp.h"
#include "common/text_count.h"
#include "setup/train_auto_layout.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;
using Batches = std::vector<std::vector<int64_t>>;

class TrainSearchBatches : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::test_temp_path("train_search_batches");
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const std::string corpus = (dir_ / "corpus").string();
    const ShellResult r = run_cli(
        fmt::format("data synth --num-documents 120 --seq-length 4096 --output {}", corpus));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    yaml_ = (dir_ / "run.yaml").string();
    std::ofstream(yaml_) << fmt::format(
        "num-layers: 2\nhidden-size: 32\nnum-attention-heads: 2\ncost-model-update: off\n"
        "split: \"80,10,10\"\ndata-path: {}\n",
        corpus);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The run's configuration, read as `train --config` reads it, with `more` YAML added.
  Config config(const std::string& more = "") const {
    std::ifstream in(yaml_);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Config cfg;
    options::apply_yaml(cfg, text + more, yaml_);
    cfg.validate();
    return cfg;
  }

  // Every trained iteration's (sequences, tokens) from a metrics file.
  static std::vector<std::pair<int64_t, int64_t>> trained(const std::string& metrics) {
    std::vector<std::pair<int64_t, int64_t>> out;
    std::ifstream in(metrics);
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j.contains("sequences") && j.contains("tokens"))
        out.emplace_back(j.at("sequences").get<int64_t>(), j.at("tokens").get<int64_t>());
    }
    return out;
  }

  static std::vector<std::pair<int64_t, int64_t>> shape(const Batches& batches) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const std::vector<int64_t>& b : batches) {
      int64_t tokens = 0;
      for (int64_t n : b) tokens += n;
      out.emplace_back(static_cast<int64_t>(b.size()), tokens);
    }
    return out;
  }

  fs::path dir_;
  std::string yaml_;
};

// What the training runs below add to the configuration file.
const char* const kRun = "--seq-length 512 --global-batch-size 4";
const char* const kRunYaml = "seq-length: 512\nglobal-batch-size: 4\n";

// A fresh run samples its iterations 1..2 (capped at --train-iters); resumed from that run's
// checkpoint, the sample starts at the checkpoint's consumed samples: iterations 3..5.
TEST_F(TrainSearchBatches, FreshAndResumedSamplesAreTheBatchesTrainTrains) {
  const std::string ck = (dir_ / "ck").string();
  const std::string first = (dir_ / "first.jsonl").string();
  const std::string resumed = (dir_ / "resumed.jsonl").string();
  ASSERT_EQ(run_cli(fmt::format("train -q --config {} {} --train-iters 2 --save {} --metrics {}",
                                yaml_, kRun, ck, first))
                .exit_code,
            0);
  ASSERT_EQ(run_cli(fmt::format("train -q --config {} {} --train-iters 5 --load {} --metrics {}",
                                yaml_, kRun, ck, resumed))
                .exit_code,
            0);
  const Batches fresh =
      setup::train_search_batches(config(fmt::format("{}train-iters: 2\n", kRunYaml)), 4);
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(shape(fresh), trained(first));
  const Batches next = setup::train_search_batches(
      config(fmt::format("{}train-iters: 5\nload: {}\n", kRunYaml, ck)), 4);
  ASSERT_EQ(next.size(), 3u);
  EXPECT_EQ(shape(next), trained(resumed));
  // They are batches 3..5 of the run's order, not its first ones again.
  const Batches all =
      setup::train_search_batches(config(fmt::format("{}train-iters: 5\n", kRunYaml)), 5);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(next, Batches(all.begin() + 2, all.end()));

  // A resumed run with nothing left to train has no batch to search on.
  const ShellResult done =
      run_cli(fmt::format("train --config {} {} --pp auto --train-iters 2 --load {} --metrics {}",
                          yaml_, kRun, ck, first));
  EXPECT_EQ(done.exit_code, 2) << done.output;
  EXPECT_EQ(testing::text_count(done.output, "infinipipe: error"), 1) << done.output;
  EXPECT_NE(done.output.find("nothing is left to train"), std::string::npos) << done.output;
}

// --outlier-delay weighs sequences at the layout's pipeline, so its batches are not known
// before the search: refused with any auto degree, by train and by `config show` alike.
TEST_F(TrainSearchBatches, OutlierDelayIsRefusedWithAnAutoDegree) {
  // With dp searched too, the delay's batches are not known before the search.
  const ShellResult r = run_cli(fmt::format(
      "train --config {} --seq-length 4096 --pp auto --global-batch-size 8 --outlier-delay "
      "--train-iters 1",
      yaml_));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(testing::text_count(r.output, "infinipipe: error"), 1) << r.output;
  EXPECT_NE(r.output.find("--outlier-delay reorders the batches by data-parallel-size"),
            std::string::npos)
      << r.output;
  // `config show` checks it as train does before its search; a fixed dp of 2 goes.
  const ShellResult show = run_cli("config show --pp auto --dp auto --outlier-delay");
  EXPECT_EQ(show.exit_code, 2) << show.output;
  EXPECT_NE(show.output.find("--outlier-delay reorders the batches"), std::string::npos)
      << show.output;
  EXPECT_EQ(run_cli("config show --pp auto --dp 1 --outlier-delay").exit_code, 2);
  const ShellResult pp = run_cli("config show --pp auto --dp 2 --global-batch-size 8 --outlier-delay");
  EXPECT_EQ(pp.exit_code, 2) << pp.output;
  EXPECT_NE(pp.output.find("give --pp N and --vpp N"), std::string::npos) << pp.output;
  EXPECT_EQ(
      run_cli("config show --pp 2 --dp 2 --vpp auto --global-batch-size 8 --outlier-delay").exit_code,
      2);
  EXPECT_EQ(run_cli("config show --pp 2 --dp 2 --global-batch-size 8 --outlier-delay").exit_code, 0);
}

}  // namespace
}  // namespace infinipipe
