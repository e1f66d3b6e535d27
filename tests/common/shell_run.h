// Runs a shell command the way a user would and captures what they would see: the tests that run
// the infinipipe binary, mpirun jobs and scripts share it.
#pragma once

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace infinipipe::testing {

struct ShellResult {
  int exit_code = -1;  // 128 + the signal when it was killed; -1 when it could not start
  std::string output;  // stdout and stderr together
  double seconds = 0;
};

inline ShellResult shell_run(const std::string& cmd) {
  ShellResult r;
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    r.output = "popen failed for: " + cmd;
    return r;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace infinipipe::testing
