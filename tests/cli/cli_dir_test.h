// Fixture of the CLI tests that run the binary on files: a fresh directory per test (dir_), and
// one OpenMP thread in the children (a tiny model on a busy machine only waits on more), both
// undone afterwards.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

class CliDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = getenv("OMP_NUM_THREADS");
    if (old != nullptr) old_threads_ = old;
    setenv("OMP_NUM_THREADS", "1", 1);
    dir_ = std::filesystem::path(::testing::TempDir()) /
           fmt::format("infinipipe_cli_{}_{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
    if (old_threads_.empty()) {
      unsetenv("OMP_NUM_THREADS");
    } else {
      setenv("OMP_NUM_THREADS", old_threads_.c_str(), 1);
    }
  }

  std::filesystem::path dir_;

 private:
  std::string old_threads_;
};
