// main() of test_comm (replaces gtest_main): under mpirun it brings MPI up for the tests, keeps
// the output of ranks other than 0 to their failures, or runs a fault scenario instead.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "common/mpi_test_ranks.h"
#include "common/text_count.h"
#include "mpi_test_util.h"

namespace infinipipe::test {

int scenario_main(const std::string& name);  // scenarios.cc

namespace {

std::unique_ptr<Comm> g_comm;

}  // namespace

bool under_mpirun() {
  return mpi_launched();
}

std::string test_binary_path() {
  return test_self_exe_path("./test_comm");
}

Comm& test_comm() {
  return *g_comm;
}

testing::ShellResult run_job(int np, const std::string& args, const std::string& env,
                             double timeout_s) {
  std::string cmd = fmt::format(
      "timeout -s KILL {} mpirun --allow-run-as-root --oversubscribe --bind-to none -np {} "
      "env OMP_NUM_THREADS=1 {} {} {}",
      static_cast<int>(timeout_s), np, env, test_binary_path(), args);
  return testing::shell_run(cmd);
}

void relaunch_current_test(int np) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string filter = fmt::format("{}.{}", info->test_suite_name(), info->name());
  testing::ShellResult r = run_job(np, "--gtest_filter=" + filter);
  EXPECT_EQ(r.exit_code, 0) << "mpirun -np " << np << " of " << filter << " failed:\n" << r.output;
  EXPECT_EQ(testing::text_count(r.output, "[  SKIPPED ]"), 0) << r.output;
}

testing::ShellResult run_scenario(int np, const std::string& name, const std::string& env,
                                  double timeout_s) {
  return run_job(np, "", "INFINIPIPE_MPI_SCENARIO=" + name + " " + env, timeout_s);
}

}  // namespace infinipipe::test

int main(int argc, char** argv) {
  using namespace infinipipe;
  if (const char* scenario = std::getenv("INFINIPIPE_MPI_SCENARIO")) {
    return test::scenario_main(scenario);
  }
  ::testing::InitGoogleTest(&argc, argv);
  if (!test::under_mpirun()) return RUN_ALL_TESTS();
  CommOptions opts;
  opts.p2p_timeout_s = 20;  // a rank that failed an assertion and left early fails the test fast
  opts.ask_timeout_s = 1;
  opts.blame_grace_s = 0.5;
  test::g_comm = std::make_unique<Comm>(opts);
  test::test_quiet_other_ranks(test::g_comm->rank());
  int rc = RUN_ALL_TESTS();
  test::g_comm.reset();
  return rc;
}
