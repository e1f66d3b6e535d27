// `plan` and `simulate --calibration FILE` with the measured links between hosts that `profile`
// writes across hosts: each replica is planned on the links its pipeline crosses, --rank-placement
// orders the ranks, auto plans both orders and says which it kept and why, and a table that cannot
// hold the job is a usage error.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"

namespace {

// A model whose activations outweigh its gradients (hidden 64, sequences of 4096 tokens).
const std::string kModel =
    "--num-layers 4 --hidden-size 64 --num-attention-heads 4 --vocab-size 257 --seq-length 4096 "
    "--device cpu";
const std::string kJob = " --pp 2 --dp 2 --global-batch-size 16 --distribution fixed";

class HostLinksCli : public CliDirTest {
 protected:
  // The preset's calibration with two measured hosts of `slots` ranks each: fast inside, 20 MB/s
  // between them.
  std::string calibration(int slots) {
    const std::string plain = (dir_ / "plain.json").string();
    const ShellResult w = run_cli("cost " + kModel + " --write-calibration " + plain);
    EXPECT_EQ(w.exit_code, 0) << w.output;
    nlohmann::json j = nlohmann::json::parse(std::ifstream(plain));
    j["host_links"] = {
        {"hosts", {{{"name", "host-a"}, {"slots", slots}}, {{"name", "host-b"}, {"slots", slots}}}},
        {"links",
         {{{"between", {"host-a", "host-a"}}, {"bandwidth", 5e9}, {"latency_s", 2e-6}},
          {{"between", {"host-a", "host-b"}}, {"bandwidth", 2e7}, {"latency_s", 1e-4}},
          {{"between", {"host-b", "host-b"}}, {"bandwidth", 5e9}, {"latency_s", 2e-6}}}}};
    const std::string path = (dir_ / fmt::format("hosts{}.json", slots)).string();
    std::ofstream(path) << j.dump(2);
    return path;
  }
};

TEST_F(HostLinksCli, SimulateAutoPlansBothOrdersAndKeepsTheFaster) {
  const std::string cal = calibration(2);
  const ShellResult r =
      run_cli("simulate " + kModel + kJob + " --calibration " + cal + " --rank-placement auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("is not used"), std::string::npos) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.output, m,
      std::regex(R"(rank placement auto: pipelines on adjacent ranks \(rank = replica x pp \+ )"
                 R"(stage\): predicted step ([0-9.]+) s, ([0-9]+) tokens/s, against ([0-9.]+) s, )"
                 R"(([0-9]+) tokens/s in Megatron's order)")))
      << r.output;
  const double kept = std::stod(m[1]), other = std::stod(m[3]);
  EXPECT_LT(kept, other);
  // The table is the kept order's, replica 0 on its own pipeline's links (inside host-a).
  EXPECT_NE(r.output.find("links (pipelines on adjacent ranks, replica 0): stage 0 -> 1 host-a -> "
                          "host-a 5000.0 MB/s"),
            std::string::npos)
      << r.output;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(\| epp \| ([0-9.]+) s \|)")))
      << r.output;
  EXPECT_NEAR(std::stod(m[1]), kept, 1.5e-3);  // both replicas' shares are alike here

  // Megatron's order, given: replica 1's hop crosses to host-b, sharing the link with replica 0's.
  const ShellResult meg = run_cli("simulate " + kModel + kJob + " --calibration " + cal +
                                  " --rank-placement megatron --replica 1");
  ASSERT_EQ(meg.exit_code, 0) << meg.output;
  EXPECT_NE(meg.output.find("links (Megatron's order, replica 1): stage 0 -> 1 host-a -> host-b "
                            "10.0 MB/s, 100 us"),
            std::string::npos)
      << meg.output;
  ASSERT_TRUE(std::regex_search(meg.output, m, std::regex(R"(\| epp \| ([0-9.]+) s \|)")))
      << meg.output;
  EXPECT_NEAR(std::stod(m[1]), other, 1.5e-3);
}

TEST_F(HostLinksCli, PlanEveryReplicaOnItsLinksAndCostShowsThem) {
  const std::string cal = calibration(2);
  const ShellResult r =
      run_cli("plan " + kModel + kJob + " --calibration " + cal +
              " --rank-placement auto --replica all --out " + (dir_ / "p.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rank placement auto: pipelines on adjacent ranks"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("replica 1: "), std::string::npos) << r.output;
  const ShellResult c = run_cli("cost " + kModel + " --calibration " + cal);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find("measured hosts: host-a (2 slots), host-b (2 slots)"), std::string::npos)
      << c.output;
  EXPECT_NE(c.output.find("link host-a <-> host-b: 20.0 MB/s, 100 us"), std::string::npos)
      << c.output;
  // --write-calibration keeps the table.
  const std::string again = (dir_ / "again.json").string();
  ASSERT_EQ(run_cli("cost " + kModel + " --calibration " + cal + " --write-calibration " + again)
                .exit_code,
            0);
  EXPECT_TRUE(nlohmann::json::parse(std::ifstream(again)).contains("host_links"));
}

TEST_F(HostLinksCli, ATableThatCannotHoldTheJobIsAUsageError) {
  const ShellResult small = run_cli("simulate " + kModel + kJob + " --calibration " +
                                    calibration(1) + " --rank-placement pipelines");
  EXPECT_EQ(small.exit_code, 2) << small.output;
  EXPECT_NE(small.output.find("4 ranks do not fit the 2 slots of the measured hosts"),
            std::string::npos)
      << small.output;
  // A saved plan is one replica's in one order: auto cannot choose for it.
  const std::string cal = calibration(2);
  const std::string plan = (dir_ / "p.json").string();
  ASSERT_EQ(run_cli("plan " + kModel + kJob + " --calibration " + cal + " --out " + plan).exit_code,
            0);
  const ShellResult saved = run_cli("simulate " + kModel + kJob + " --calibration " + cal +
                                    " --plan " + plan + " --rank-placement auto");
  EXPECT_EQ(saved.exit_code, 2) << saved.output;
  EXPECT_NE(saved.output.find("give --replica N and --rank-placement megatron or pipelines"),
            std::string::npos)
      << saved.output;
  const ShellResult replay = run_cli("simulate " + kModel + kJob + " --calibration " + cal +
                                     " --plan " + plan + " --rank-placement megatron");
  EXPECT_EQ(replay.exit_code, 0) << replay.output;
}

}  // namespace
