// What the profiler records about the machine it measured: its name, the time, and the rate of a
// dense fp32 matmul on it.
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "model/matmul.h"
#include "profile/profile.h"
#include "profile/profile_timer.h"

namespace infinipipe::profile {

std::string machine_name() {
  std::string model;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return fmt::format("{} ({}, {} CPUs online)", host, model.empty() ? "unknown CPU" : model,
                     sysconf(_SC_NPROCESSORS_ONLN));
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double profile_sgemm_flops(int64_t n, int64_t repeats) {
  if (n < 1 || repeats < 1)
    fail_config("profile: the sgemm needs size and repeats >= 1, got {} and {}", n, repeats);
  const size_t count = static_cast<size_t>(n * n);
  std::vector<float> a(count, 0.5f), b(count, 0.25f), c(count, 0.0f);
  double best = 0;
  for (int64_t i = 0; i <= repeats;
       ++i) {  // the first run is the warm-up (oneDNN builds its kernel)
    const auto t0 = ProfileClock::now();
    gemm_f32(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = seconds_since(t0);
    if (i > 0 && (best == 0 || s < best)) best = s;
  }
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / best;
}

}  // namespace infinipipe::profile
