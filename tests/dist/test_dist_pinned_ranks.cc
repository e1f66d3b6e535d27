// `mpirun --map-by core --bind-to core:overload-allowed -np 4` pins pp 2 x dp 2 to two CPUs in
// turn, so replica d's two stages share CPU d. Every plan carries those hosts
// (each replica's own CPU, two ranks on one core), and ranks free to migrate (--bind-to none)
// carry the machine's CPUs shared by all four.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/build_paths.h"
#include "common/shell_run.h"
#include "corpus_dir_fixture.h"
#include "dist_test_util.h"

namespace infinipipe {
namespace {

class DistPinnedRanks : public disttest::CorpusDirTest {
 protected:
  DistPinnedRanks() : CorpusDirTest("distpinned") {}

  // Trains 2 iterations with `binding`, traced; the plans' rank_hosts by replica.
  std::vector<nlohmann::json> hosts(const std::string& binding) {
    const std::string run = (dir_ / ("run-" + std::to_string(runs_++))).string();
    const testing::ShellResult r = testing::shell_run(fmt::format(
        "timeout -s KILL 120 mpirun --allow-run-as-root --oversubscribe {} -np 4 env "
        "OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive {} train --pp 2 --dp 2 --num-layers 2 "
        "--hidden-size 64 --num-attention-heads 4 --num-query-groups 2 --group-query-attention "
        "--seq-length 256 --global-batch-size 4 --train-iters 2 --data-path {} --trace {}",
        binding, INFINIPIPE_BINARY, (dir_ / "corpus").string(), run));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::vector<nlohmann::json> out;
    for (int d = 0; d < 2; ++d) {
      std::ifstream in(fmt::format("{}/plans/iter-00000002-replica{}.json", run, d));
      const nlohmann::json p = nlohmann::json::parse(in);
      out.push_back(p.contains("plan") ? p.at("plan").at("rank_hosts") : p.at("rank_hosts"));
    }
    return out;
  }
  int runs_ = 0;
};

TEST_F(DistPinnedRanks, EachReplicasStagesShareItsCpu) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two CPUs";
  const std::vector<nlohmann::json> pinned =
      hosts("--map-by core --bind-to core:overload-allowed");
  ASSERT_EQ(pinned.size(), 2u);
  for (int d = 0; d < 2; ++d) {
    // {node (its lowest rank), cores, ranks}: world ranks d and d + 2 on CPU d.
    EXPECT_EQ(pinned[d], nlohmann::json::parse(fmt::format("[[{0},1,2],[{0},1,2]]", d)))
        << "replica " << d;
  }
  const std::vector<nlohmann::json> free = hosts("--bind-to none");
  const auto cpus = static_cast<int>(std::thread::hardware_concurrency());
  for (int d = 0; d < 2; ++d)
    EXPECT_EQ(free[d], nlohmann::json::parse(fmt::format("[[0,{0},4],[0,{0},4]]", cpus)));
}

}  // namespace
}  // namespace infinipipe
