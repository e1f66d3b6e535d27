// How a 4-rank job ends when something goes wrong: never a hang, a non-zero exit within the
// 60 s bound, and the error on the terminal once. Each test launches a scenario of
// scenarios.cc under mpirun and inspects the whole job's output.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/test_temp.h"
#include "common/text_count.h"
#include "mpi_test_util.h"

namespace infinipipe {
namespace {

using testing::text_count;

// How often `pattern` matches in `text`. Durations in messages are measured, so they are matched
// by pattern: a loaded machine may report 4 s where 3 s were configured.
int count_matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// The job failed (exit code 1) well inside the 60 s in which a fault must end it.
void expect_failed_in_time(const testing::ShellResult& r) {
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_LT(r.seconds, 30) << r.output;
}

TEST(JobFault, CleanRunExitsZero) {
  MPI_TEST_LAUNCHER();
  testing::ShellResult r = test::run_scenario(4, "clean");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(text_count(r.output, "scenario finished"), 1) << r.output;  // rank 0 only
  EXPECT_EQ(text_count(r.output, "infinipipe:"), 0) << r.output;
}

// kill -9 of one rank: OpenMPI notices the dead process and ends the job; the survivors say
// what they were doing when they were stopped.
TEST(JobFault, KilledRankEndsTheJob) {
  MPI_TEST_LAUNCHER();
  testing::ShellResult r = test::run_scenario(4, "kill");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(r.seconds, 60) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("signal 9"), std::string::npos) << r.output;
  EXPECT_GE(text_count(r.output, "was stopped during"), 1) << r.output;
  EXPECT_EQ(text_count(r.output, "scenario finished"), 0) << r.output;
}

// The same from outside: `kill -9` of rank 2's process while the pipeline runs; the job must
// end within the 60 s bound (OpenMPI takes seconds).
TEST(JobFault, KillNineFromOutsideEndsTheJobInTime) {
  MPI_TEST_LAUNCHER();
  const std::string pid_file = test::test_temp_path("rank2.pid").string();
  std::remove(pid_file.c_str());
  testing::ShellResult r;
  std::thread job([&] {
    r = test::run_scenario(4, "run", "SCENARIO_PID_RANK=2 SCENARIO_PID_FILE=" + pid_file,
                           /*timeout_s=*/90);
  });
  // Up to 60 s for the file to appear (the job starting and the pipeline busy); it appears whole.
  int pid = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (pid <= 0 && std::chrono::steady_clock::now() < deadline) {
    if (std::FILE* f = std::fopen(pid_file.c_str(), "r")) {
      if (std::fscanf(f, "%d", &pid) != 1) pid = -1;
      std::fclose(f);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto killed = std::chrono::steady_clock::now();
  if (pid > 0) kill(pid, SIGKILL);
  job.join();
  double after_kill =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::remove(pid_file.c_str());
  ASSERT_GT(pid, 0) << "rank 2 never wrote its pid:\n" << r.output;
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(after_kill, 60) << r.output;
  EXPECT_NE(r.output.find("rank 2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("signal 9"), std::string::npos) << r.output;
  std::printf("job ended %.2f s after kill -9 of rank 2\n", after_kill);
}

// A hung rank (alive, never sends): the ranks waiting on it directly ask it what it is doing,
// get no answer and name it; the rank behind them (rank 3, waiting on rank 2) learns that
// rank 2 is itself waiting and leaves the report to it.
TEST(JobFault, HungRankTimesOutNamingThePeer) {
  MPI_TEST_LAUNCHER();
  testing::ShellResult r = test::run_scenario(
      4, "hang", "SCENARIO_P2P_TIMEOUT=2 SCENARIO_ASK_TIMEOUT=1 SCENARIO_WATCHDOG_TIMEOUT=50");
  expect_failed_in_time(r);
  // At least the 2 s of the timeout and the 1 s of the question.
  const std::string from2 =
      R"(infinipipe: error: rank 2 \(stage 2, replica 0\) waited ([3-9]|[1-9][0-9]) s for the )"
      R"(activation of chunk 2 from rank 1 \(stage 1, replica 0\) during forward of chunk 2 )"
      R"(\(iteration 2\): rank 1 does not answer, so it has died or is stuck outside )"
      R"(communication\.)";
  const std::string from0 =
      R"(infinipipe: error: rank 0 \(stage 0, replica 0\) waited ([3-9]|[1-9][0-9]) s for the )"
      R"(send of the activation of chunk 3 to rank 1 \(stage 1, replica 0\) during forward of )"
      R"(chunk 3 \(iteration 2\): rank 1 does not answer, so it has died or is stuck outside )"
      R"(communication\.)";
  int n2 = count_matches(r.output, from2), n0 = count_matches(r.output, from0);
  EXPECT_LE(n2, 1) << r.output;
  EXPECT_LE(n0, 1) << r.output;
  EXPECT_GE(n2 + n0, 1) << r.output;
  EXPECT_EQ(text_count(r.output, "infinipipe: error: rank 3 "), 0) << r.output;
  EXPECT_EQ(text_count(r.output, "infinipipe: error"), n2 + n0) << r.output;
}

// A rank hung before a collective: the others ask every member of the group, and name the one
// that does not answer instead of blaming the group as a whole.
TEST(JobFault, HungRankBeforeACollectiveIsNamed) {
  MPI_TEST_LAUNCHER();
  testing::ShellResult r = test::run_scenario(
      3, "hang_collective",
      "SCENARIO_P2P_TIMEOUT=2 SCENARIO_ASK_TIMEOUT=1 SCENARIO_WATCHDOG_TIMEOUT=50");
  expect_failed_in_time(r);
  EXPECT_GE(text_count(r.output,
                       "for the reduction of the loss of iteration 1: rank 2 does not "
                       "answer, so it has died or is stuck outside communication."),
            1)
      << r.output;
  EXPECT_EQ(text_count(r.output, "rank 0 does not answer"), 0) << r.output;
  EXPECT_EQ(text_count(r.output, "rank 1 does not answer"), 0) << r.output;
}

// A rank stuck outside any MPI wait: only its watchdog can see it.
TEST(JobFault, WatchdogAbortsAStuckRank) {
  MPI_TEST_LAUNCHER();
  testing::ShellResult r = test::run_scenario(
      4, "hang", "SCENARIO_P2P_TIMEOUT=40 SCENARIO_WATCHDOG_TIMEOUT=2 SCENARIO_WATCHDOG_RANK=1");
  expect_failed_in_time(r);
  EXPECT_EQ(count_matches(r.output,
                          R"(infinipipe: error on rank 1 \(stage 1, replica 0\): no progress for )"
                          R"(([2-9]|[1-9][0-9]) s during forward of chunk 2 \(iteration 2\) )"
                          R"(\(watchdog timeout 2 s\))"),
            1)
      << r.output;
}

TEST(JobFault, ErrorOnOneRankReachesTheTerminalOnce) {
  MPI_TEST_LAUNCHER();
  testing::ShellResult r = test::run_scenario(4, "error", "SCENARIO_P2P_TIMEOUT=30");
  expect_failed_in_time(r);
  EXPECT_EQ(
      text_count(r.output,
                 "infinipipe: error on rank 3 (stage 3, replica 0): bad data in shard 3: re-run "
                 "prepare"),
      1)
      << r.output;
  EXPECT_EQ(text_count(r.output, "infinipipe: error"), 1) << r.output;
}

TEST(JobFault, SameConfigErrorOnEveryRankPrintedOnce) {
  MPI_TEST_LAUNCHER();
  testing::ShellResult r = test::run_scenario(4, "config");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(text_count(r.output, "infinipipe: error"), 1) << r.output;
  EXPECT_NE(r.output.find("the job has 4 ranks but --pipeline-model-parallel-size 3"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace infinipipe
