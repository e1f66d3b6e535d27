// Shared by the mains of test binaries that re-run themselves under mpirun (tests/comm,
// tests/dist): where the binary is, and output of ranks other than 0 reduced to their failures.
#pragma once

#include <unistd.h>

#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace infinipipe::test {

inline std::string test_self_exe_path(const char* fallback) {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return fallback;
  return std::string(buf, static_cast<size_t>(n));
}

// Prints a failing assertion of a rank other than 0, prefixed by the rank.
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

// Rank 0 prints the usual gtest report; the others print only their failures.
inline void test_quiet_other_ranks(int rank) {
  if (rank == 0) return;
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  listeners.Append(new RankFailurePrinter(rank));
}

}  // namespace infinipipe::test
