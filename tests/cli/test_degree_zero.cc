// A parallel degree of 0 through the binary's parser: never a size, never auto. --vpp 0 (as
// Megatron-LM's --virtual-pipeline-model-parallel-size, where absent means no interleaving) is one
// error saying how to ask for either, in every command and in a config file; so is --pp / --dp 0,
// and train never starts a layout search for a 0.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/run_cli.h"
#include "common/test_temp.h"
#include "common/text_count.h"

namespace {

namespace fs = std::filesystem;

void expect_one_error(const std::string& args, const std::string& says) {
  const ShellResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  EXPECT_EQ(infinipipe::testing::text_count(r.output, "infinipipe: error"), 1) << args << "\n"
                                                                               << r.output;
  EXPECT_NE(r.output.find(says), std::string::npos) << args << "\n" << r.output;
  EXPECT_EQ(r.output.find("layout search over"), std::string::npos) << args << "\n" << r.output;
}

const char* const kVppHint = "give --vpp 1 for no virtual stages or --vpp auto to search";

TEST(DegreeZero, VppZeroIsOneErrorInEveryCommand) {
  for (const char* args :
       {"train --pp auto --vpp 0", "train --pp 2 --dp auto --vpp 0", "train --vpp 0",
        "plan --distribution github --vpp 0", "simulate --distribution github --vpp 0",
        "config show --vpp 0", "config show --pp auto --vpp 0",
        "config show --num-virtual-stages-per-pipeline-rank 0",
        "config show --virtual-pipeline-model-parallel-size 0"})
    expect_one_error(args, kVppHint);
}

TEST(DegreeZero, VppZeroInAConfigFileIsTheSameError) {
  const fs::path dir = infinipipe::test::test_temp_path("degree_zero");
  fs::create_directories(dir);
  const std::string file = (dir / "vpp0.yaml").string();
  std::ofstream(file)
      << "pipeline-model-parallel-size: auto\nvirtual-pipeline-model-parallel-size: 0\n";
  expect_one_error("config check " + file, kVppHint);
  expect_one_error("train --config " + file, kVppHint);
  fs::remove_all(dir);
}

TEST(DegreeZero, OtherDegreesOfZeroAreRefusedAsNotPositive) {
  for (const char* args : {"train --pp auto --dp 0", "train --pp 0 --dp auto",
                           "plan --distribution github --pp 0", "config show --dp 0"})
    expect_one_error(args, "must be a positive integer or auto");
}

// 1 is the size that means no virtual stages, and stays accepted.
TEST(DegreeZero, VppOneMeansNoVirtualStages) {
  const ShellResult r = run_cli("config show --vpp 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(("\n" + r.output).find("\nvirtual-pipeline-model-parallel-size: 1\n"),
            std::string::npos)
      << r.output;
}

}  // namespace
