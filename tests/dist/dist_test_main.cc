// main() of test_dist (replaces gtest_main): under mpirun it brings MPI up for the tests and keeps
// the output of ranks other than 0 to their failures.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "dist_test_util.h"

namespace infinipipe::disttest {

namespace {

std::unique_ptr<Comm> g_comm;

std::string self_exe_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "./test_dist";
  return std::string(buf, static_cast<size_t>(n));
}

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    fmt::print(stderr, "[rank {}] {}:{}: Failure\n{}\n", rank_, r.file_name() ? r.file_name() : "?",
               r.line_number(), r.summary());
  }

 private:
  int rank_;
};

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
      np, self_exe_path(), filter);
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
  const int rank = disttest::g_comm->rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new disttest::RankFailurePrinter(rank));
  }
  const int rc = RUN_ALL_TESTS();
  disttest::g_comm.reset();
  return rc;
}
