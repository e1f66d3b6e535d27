// Helpers for tests that need several MPI ranks. Each such test works two ways:
//  * under mpirun (OMPI_COMM_WORLD_SIZE set): the body runs on every rank;
//  * alone (a plain `ctest` entry): it reruns itself as `mpirun -np N <this binary>
//    --gtest_filter=<this test>` and passes when every rank passed.
// Fault tests instead run a named scenario (tests/comm/scenarios.cc) under mpirun and check how
// the job ends: exit code, time, and what reached the terminal.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "comm/mpi_comm.h"
#include "common/shell_run.h"

namespace infinipipe::test {

bool under_mpirun();
Comm& test_comm();  // the process's Comm, made by main() under mpirun

// Runs `mpirun -np np <this binary> args` (with extra environment assignments "K=V ...") under
// a hard timeout of timeout_s seconds.
testing::ShellResult run_job(int np, const std::string& args, const std::string& env = "",
                             double timeout_s = 90);
// Runs the current test under mpirun -np np and records a failure (with the output) unless
// every rank passed.
void relaunch_current_test(int np);
// Runs scenario `name` of scenarios.cc on np ranks.
testing::ShellResult run_scenario(int np, const std::string& name, const std::string& env = "",
                                  double timeout_s = 90);
std::string test_binary_path();  // this test binary, for scripts that launch it

}  // namespace infinipipe::test

// First statement of a multi-rank test: relaunches under mpirun when run alone, skips under
// mpirun with another world size.
#define MPI_TEST_RANKS(np)                                       \
  do {                                                           \
    if (!::infinipipe::test::under_mpirun()) {                   \
      ::infinipipe::test::relaunch_current_test(np);             \
      return;                                                    \
    }                                                            \
    if (::infinipipe::test::test_comm().size() != (np)) {        \
      GTEST_SKIP() << "needs " << (np) << " ranks, the job has " \
                   << ::infinipipe::test::test_comm().size();    \
    }                                                            \
  } while (0)

// First statement of a test that launches jobs itself (it must not run inside one).
#define MPI_TEST_LAUNCHER()                                                \
  do {                                                                     \
    if (::infinipipe::test::under_mpirun()) {                              \
      GTEST_SKIP() << "launches its own mpirun jobs; runs outside mpirun"; \
    }                                                                      \
  } while (0)
