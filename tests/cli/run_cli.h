// Runs the real `infinipipe` binary and captures what a user would see.
#pragma once

#include <string>

#include "common/build_paths.h"
#include "common/shell_run.h"

using infinipipe::testing::ShellResult;

inline ShellResult run_cli(const std::string& args) {
  return infinipipe::testing::shell_run(std::string(INFINIPIPE_BINARY) + " " + args);
}
