// The fixture of Trainer tests in one process: a fresh directory per test (removed after it), and
// one OpenMP thread, since the tiny models these tests train only wait on a busy machine with more.
#pragma once

#include <omp.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "common/test_temp.h"

namespace infinipipe::testing {

class TrainerDirTest : public ::testing::Test {
 protected:
  explicit TrainerDirTest(std::string stem) : stem_(std::move(stem)) {}

  void SetUp() override {
    threads_ = omp_get_max_threads();
    omp_set_num_threads(1);
    dir_ = test::test_temp_path(stem_);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    omp_set_num_threads(threads_);
  }

  std::filesystem::path dir_;

 private:
  std::string stem_;
  int threads_ = 1;
};

}  // namespace infinipipe::testing
