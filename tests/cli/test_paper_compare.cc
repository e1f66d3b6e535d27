// `simulate --compare --baselines paper` on one small fixed setting must print the golden table
// (tests/cli/golden/paper_compare.md). After a deliberate change to the cost model or a
// baseline, rewrite it with INFINIPIPE_UPDATE_GOLDEN=1 and review the diff.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/run_cli.h"
#include "common/build_paths.h"

namespace {

const std::string kGolden = std::string(INFINIPIPE_SOURCE_DIR) + "/tests/cli/golden/";

// Everything but the line of planning times, which vary from run to run.
std::string stable_lines(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line))
    if (line.rfind("(pipeline rows:", 0) != 0) out += line + "\n";
  return out;
}

TEST(PaperCompare, GoldenTable) {
  const ShellResult r = run_cli(
      "simulate --compare --baselines paper --device a800-80gb --bf16 --num-layers 8 "
      "--hidden-size 2048 --num-attention-heads 16 --ffn-hidden-size 5632 --vocab-size 32000 "
      "--untie-embeddings-and-output-weights "
      "--seq-length 16384 --num-devices 16 --devices-per-node 8 --pp 2 --ulysses-degree 8 "
      "--global-batch-size 16 --megatron-cp 2 --megatron-recompute-layers 2 --deepspeed-sp 16 "
      "--lengths " +
      kGolden + "paper_compare_lengths.txt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string got = stable_lines(r.output);
  const std::string path = kGolden + "paper_compare.md";
  if (std::getenv("INFINIPIPE_UPDATE_GOLDEN")) std::ofstream(path) << got;
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path << ": run with INFINIPIPE_UPDATE_GOLDEN=1";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(got, want.str());
}

TEST(PaperCompare, PaperFlagsNeedPaperBaselines) {
  const ShellResult r = run_cli("simulate --compare --megatron-tp 4 --num-layers 4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--baselines"), std::string::npos) << r.output;
}

// A baseline setting given by flag that cannot run fails the command, naming the flag.
TEST(PaperCompare, ImpossibleFlagIsAnError) {
  const ShellResult r = run_cli(
      "simulate --compare --baselines paper --num-layers 4 --hidden-size 512 "
      "--num-attention-heads 8 --num-devices 16 --devices-per-node 8 --pp 2 --ulysses-degree 8 "
      "--global-batch-size 4 --megatron-tp 3 --lengths " +
      kGolden + "paper_compare_lengths.txt");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--megatron-tp"), std::string::npos) << r.output;
  EXPECT_NE(run_cli("simulate --compare --baselines best --num-layers 4").exit_code, 0);
}

TEST(CostCli, PrintsTheLinksAndTheirSources) {
  const ShellResult r = run_cli(
      "cost --device a800-80gb --bf16 --num-devices 16 --devices-per-node 8 "
      "--pp 2 --ulysses-degree 8 --inter-node-latency 2e-5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The inter-node link is the a800 send/recv row (8.03 GB/s); the option sets its latency.
  EXPECT_NE(r.output.find("inter-node 8.03e+09 B/s, 2e-05 s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PER NODE"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("set by the configuration: inter-node latency"), std::string::npos)
      << r.output;
}

}  // namespace
