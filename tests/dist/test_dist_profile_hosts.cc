// `mpirun -np 2 infinipipe profile` on one host: the links between hosts are measured only when
// the ranks span two hosts or more (tests/dist/test_dist_multihost.cc,
// DistMultiHost.ProfileWritesTheLinksBetweenTheHosts); here it says there is nothing to measure
// and the calibration file has no host links.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/build_paths.h"
#include "common/shell_run.h"
#include "common/test_temp.h"
#include "dist_test_util.h"

namespace infinipipe {
namespace {

TEST(DistProfileHosts, OneHostWritesNoHostLinksAndSaysSo) {
  if (disttest::under_mpirun()) GTEST_SKIP() << "launches its own mpirun job";
  const std::string dir = test::test_temp_dir_make("profile_hosts");
  const std::string out = dir + "/calibration.json";
  const testing::ShellResult r = testing::shell_run(fmt::format(
      "timeout -s KILL 240 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 env "
      "OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive {} profile --quick --num-layers 2 "
      "--hidden-size 64 --num-attention-heads 4 --seq-length 1024 --device cpu --out {}",
      INFINIPIPE_BINARY, out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("links between hosts: all 2 ranks run on one host"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("so the file has no host links"), std::string::npos) << r.output;
  const nlohmann::json cal = nlohmann::json::parse(std::ifstream(out));
  EXPECT_FALSE(cal.contains("host_links")) << cal.dump(1);
  // Ranks 0 and 1 share the host: their ping-pong is the link inside it.
  EXPECT_NE(r.output.find("p2p fit: "), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace infinipipe
