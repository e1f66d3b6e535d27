// `simulate --compare --json`: every row's step in the InfiniPipe paper's four parts (ZeRO, A2A,
// Bubble & P2P, Others; §V-C, Fig. 8), which add up to the step for every system, pipeline or not,
// the paper's baselines and the tuned ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "common/build_paths.h"

namespace {

const std::string kPartsLengths =
    std::string(INFINIPIPE_SOURCE_DIR) + "/tests/cli/golden/paper_compare_lengths.txt";

// A small Llama on 16 A800s, memory tight enough that recompute and several micro-batches run.
const std::string kPartsSetting =
    "--device a800-80gb --bf16 --num-layers 8 --hidden-size 2048 --num-attention-heads 16 "
    "--ffn-hidden-size 5632 --vocab-size 32000 --untie-embeddings-and-output-weights "
    "--seq-length 16384 --num-devices 16 --devices-per-node 8 --pp 2 --ulysses-degree 8 "
    "--global-batch-size 16 --memory-budget 3GiB --lengths " +
    kPartsLengths;

nlohmann::json compare_json(const std::string& baselines) {
  const std::string path = ::testing::TempDir() + "/compare-parts-" + baselines + ".json";
  const ShellResult r = run_cli("simulate --compare --baselines " + baselines + " " +
                                kPartsSetting + " --json " + path);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  std::remove(path.c_str());
  return j;
}

TEST(CompareParts, FourPartsAddUpToTheStepForEverySystem) {
  for (const std::string baselines : {"paper", "tuned"}) {
    const nlohmann::json j = compare_json(baselines);
    std::set<std::string> seen;
    for (const auto& row : j.at("rows")) {
      const std::string name = row.at("schedule");
      seen.insert(name);
      if (!row.at("ok")) continue;
      const auto& p = row.at("parts_s");
      double sum = 0;
      for (const char* k : {"zero", "a2a", "bubble_p2p", "others"}) {
        const double v = p.at(k);
        EXPECT_GE(v, -1e-9) << name << " " << k;
        sum += v;
      }
      const double step = row.at("step_s");
      EXPECT_NEAR(sum, step, 1e-9 * step) << baselines << " " << name;
      EXPECT_GT(p.at("others").get<double>(), 0) << name;  // every system computes
    }
    EXPECT_TRUE(seen.count("epp")) << baselines;
    if (baselines == "paper") {
      for (const char* b : {"seq1f1b", "megatron", "deepspeed", "flexsp"})
        EXPECT_TRUE(seen.count(b)) << b;
    }
  }
}

TEST(CompareParts, JsonNeedsCompare) {
  const ShellResult r = run_cli("simulate " + kPartsSetting + " --json /dev/null");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--compare"), std::string::npos) << r.output;
}

}  // namespace
