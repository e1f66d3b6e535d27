#include "obs/process_rss.h"

#include <sys/resource.h>

#include <fstream>
#include <sstream>
#include <string>

namespace infinipipe::obs {

bool rss_peak_reset() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

int64_t rss_peak_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream in(line.substr(6));
    int64_t kib = -1;
    if (in >> kib && kib >= 0) return kib * 1024;
  }
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0 && usage.ru_maxrss > 0) {
    return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
  }
  return -1;
}

}  // namespace infinipipe::obs
