// Temporary paths of the running test: under gtest's temporary directory (TEST_TMPDIR when set),
// named by the process id and the test's suite and name, so tests that run in parallel, and runs
// of the suite side by side, never share a file.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace infinipipe::test {

// <TempDir>/infinipipe_<stem>_<pid>_<suite>_<test>; nothing is created.
inline std::filesystem::path test_temp_path(const std::string& stem) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "_" + info->name() : "none";
  std::replace(name.begin(), name.end(), '/', '_');  // parameterised names hold '/'
  return std::filesystem::path(::testing::TempDir()) /
         ("infinipipe_" + stem + "_" + std::to_string(getpid()) + "_" + name);
}

// A new directory only this call can have made (mkdtemp), under gtest's temporary directory.
inline std::string test_temp_dir_make(const std::string& stem) {
  std::string name =
      (std::filesystem::path(::testing::TempDir()) / ("infinipipe_" + stem + "_XXXXXX")).string();
  if (mkdtemp(name.data()) == nullptr) ADD_FAILURE() << "cannot make a directory like " << name;
  return name;
}

}  // namespace infinipipe::test
