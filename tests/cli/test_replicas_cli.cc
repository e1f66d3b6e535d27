// `plan --replica all`: every replica's plan and the slowest replica against the mean, whose
// numbers are those of the replicas' own lines; --outlier-delay refuses what it cannot do.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"
#include "common/build_paths.h"

namespace {

const std::string kTwoReplicas = fmt::format(
    "plan --config {0}/examples/cpu-small.yaml --lengths {0}/examples/lengths-small.txt "
    "--num-devices 4 --data-parallel-size 2 ",
    INFINIPIPE_SOURCE_DIR);

class ReplicasCli : public CliDirTest {};

TEST_F(ReplicasCli, ReplicaAllPrintsEveryReplicaAndTheSlowestAgainstTheMean) {
  const std::string out = (dir_ / "p.json").string();
  const ShellResult r = run_cli(kTwoReplicas + "--replica all --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<double> steps;
  const std::regex replica_line(R"(replica (\d+): .* predicted step ([0-9.]+) s)");
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), replica_line), end; it != end;
       ++it)
    steps.push_back(std::stod((*it)[2]));
  ASSERT_EQ(steps.size(), 2u) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.output, m,
      std::regex(
          R"(replicas: slowest ([0-9.]+) s \(replica \d\), mean ([0-9.]+) s, slowest/mean ([0-9.]+))")))
      << r.output;
  const double slowest = std::max(steps[0], steps[1]), mean = (steps[0] + steps[1]) / 2;
  EXPECT_NEAR(std::stod(m[1]), slowest, 1e-3);
  EXPECT_NEAR(std::stod(m[2]), mean, 1e-3);
  EXPECT_NEAR(std::stod(m[3]), slowest / mean, 2e-3);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "p.r0.json"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "p.r1.json"));
  // simulate plans the same shares: the same line.
  std::string sim_args = kTwoReplicas + "--replica all";
  sim_args.replace(0, 4, "simulate");
  const ShellResult sim = run_cli(sim_args);
  ASSERT_EQ(sim.exit_code, 0) << sim.output;
  EXPECT_NE(sim.output.find(m.str()), std::string::npos) << sim.output;
}

TEST_F(ReplicasCli, OutlierDelayReplaysTheBatchesAndRefusesWhatItCannotDo) {
  const ShellResult r = run_cli(kTwoReplicas + "--outlier-delay --iteration 2 --out ''");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("outlier delay: batch 2 released"), std::string::npos) << r.output;
  const ShellResult one =
      run_cli(fmt::format("plan --config {0}/examples/cpu-small.yaml --lengths "
                          "{0}/examples/lengths-small.txt --outlier-delay --out ''",
                          INFINIPIPE_SOURCE_DIR));
  EXPECT_EQ(one.exit_code, 2) << one.output;
  EXPECT_NE(one.output.find("outlier-delay"), std::string::npos) << one.output;
  const ShellResult svg = run_cli(kTwoReplicas + "--replica all --svg x.svg --out ''");
  EXPECT_EQ(svg.exit_code, 2) << svg.output;
  const ShellResult bad = run_cli(kTwoReplicas + "--replica two --out ''");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
}

}  // namespace
