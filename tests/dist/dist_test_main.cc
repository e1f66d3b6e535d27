// main() of test_dist (replaces gtest_main): under mpirun it brings MPI up for the tests and keeps
// the output of ranks other than 0 to their failures.
#include <unistd.h>

#include <memory>

#include <fmt/format.h>

#include "common/mpi_test_ranks.h"
#include "common/shell_run.h"
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
  const testing::ShellResult r = testing::shell_run(fmt::format(
      "timeout -s KILL 240 mpirun --allow-run-as-root --oversubscribe --bind-to none -np {} "
      "env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive {} --gtest_filter={}",
      np, test::test_self_exe_path("./test_dist"), filter));
  EXPECT_EQ(r.exit_code, 0) << "mpirun -np " << np << " of " << filter << " failed:\n" << r.output;
  EXPECT_EQ(r.output.find("[  SKIPPED ]"), std::string::npos) << r.output;
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
