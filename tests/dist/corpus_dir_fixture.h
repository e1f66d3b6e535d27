// A test that launches its own mpirun jobs of `infinipipe train` on a small synthetic corpus in
// a fresh temporary folder (`dir_`, corpus at dir_/corpus), removed afterwards.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "common/build_paths.h"
#include "common/shell_run.h"
#include "common/test_temp.h"
#include "dist_test_util.h"

namespace infinipipe::disttest {

class CorpusDirTest : public ::testing::Test {
 protected:
  explicit CorpusDirTest(std::string name) : name_(std::move(name)) {}

  void SetUp() override {
    if (under_mpirun()) GTEST_SKIP() << "launches its own mpirun jobs";
    dir_ = test::test_temp_path(name_);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const testing::ShellResult j =
        testing::shell_run(fmt::format("{} data synth --output {} --seq-length 256",
                                       INFINIPIPE_BINARY, (dir_ / "corpus").string()));
    ASSERT_EQ(j.exit_code, 0) << j.output;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string name_;
  std::filesystem::path dir_;
};

}  // namespace infinipipe::disttest
