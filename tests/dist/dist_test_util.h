// Multi-rank tests of the distributed runtime (mirrors tests/comm): under mpirun the body runs on
// every rank; run alone (a plain ctest entry) a test reruns itself as `mpirun -np N <this binary>
// --gtest_filter=<this test>` with OMP_NUM_THREADS=1 and passes when every rank passed.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "comm/mpi_comm.h"

namespace infinipipe::disttest {

bool under_mpirun();
Comm& test_comm();  // the process's Comm, made by main() under mpirun
// Runs the current test under mpirun -np np; a failure (with the output) unless every rank passed.
void relaunch_current_test(int np);

}  // namespace infinipipe::disttest

#define DIST_TEST_RANKS(np)                                       \
  do {                                                            \
    if (!::infinipipe::disttest::under_mpirun()) {                \
      ::infinipipe::disttest::relaunch_current_test(np);          \
      return;                                                     \
    }                                                             \
    if (::infinipipe::disttest::test_comm().size() != (np)) {     \
      GTEST_SKIP() << "needs " << (np) << " ranks, the job has "  \
                   << ::infinipipe::disttest::test_comm().size(); \
    }                                                             \
  } while (0)
