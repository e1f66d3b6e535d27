// main() of test_dist (replaces gtest_main): under mpirun it brings MPI up for the tests and keeps
// the output of ranks other than 0 to their failures.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "common/mpi_test_ranks.h"
#include "dist_test_util.h"

namespace infinipipe::disttest {

namespace {

std::unique_ptr<Comm> g_comm;

}  // namespace

bool under_mpirun() {
  return mpi_launched();
}

Comm& test_comm() {
  return *g_comm;
}

void relaunch_current_test(int np) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter = fmt::format("{}.{}", info->test_suite_name(), info->name());
  const std::string cmd = fmt::format(
      "timeout -s KILL 240 mpirun --allow-run-as-root --oversubscribe --bind-to none -np {} "
      "env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive {} --gtest_filter={} 2>&1",
      np, test::test_self_exe_path("./test_dist"), filter);
  std::string output;
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << cmd;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  const int status = pclose(pipe);
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  EXPECT_EQ(rc, 0) << "mpirun -np " << np << " of " << filter << " failed:\n" << output;
  EXPECT_EQ(output.find("[  SKIPPED ]"), std::string::npos) << output;
}

}  // namespace infinipipe::disttest

int main(int argc, char** argv) {
  using namespace infinipipe;
  ::testing::InitGoogleTest(&argc, argv);
  if (!disttest::under_mpirun()) return RUN_ALL_TESTS();
  CommOptions opts;
  opts.p2p_timeout_s = 30;  // a rank that failed an assertion and left early fails the test fast
  opts.ask_timeout_s = 1;
  opts.blame_grace_s = 0.5;
  disttest::g_comm = std::make_unique<Comm>(opts);
  test::test_quiet_other_ranks(disttest::g_comm->rank());
  const int rc = RUN_ALL_TESTS();
  disttest::g_comm.reset();
  return rc;
}
