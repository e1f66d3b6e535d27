// The multi-host check as a test: scripts/multihost-check.sh puts one rank in each of two
// network namespaces (MPI over TCP through a veth pair). Skipped where namespaces are not
// permitted (not root, or a container without CAP_NET_ADMIN).
#include <string>

#include <gtest/gtest.h>

#include "common/build_paths.h"
#include "mpi_test_util.h"

namespace infinipipe {
namespace {

TEST(JobMultiHost, TwoNetworkNamespacesOverTcp) {
  MPI_TEST_LAUNCHER();
  std::string bin = test::test_binary_path();
  std::string dir = bin.substr(0, bin.find_last_of('/'));
  testing::ShellResult r = testing::shell_run(std::string("bash ") + INFINIPIPE_SOURCE_DIR +
                                              "/scripts/multihost-check.sh " + dir);
  if (r.exit_code == 77) GTEST_SKIP() << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("multihost-check: passed"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace infinipipe
