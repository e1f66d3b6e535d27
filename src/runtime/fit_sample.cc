#include "runtime/fit_sample.h"

#include <algorithm>

namespace infinipipe::runtime {

double action_fit_seconds(const obs::ActionTiming& t, const cost::RankHost* host, int threads) {
  const double wall = t.end_s - t.start_s;
  if (host == nullptr || host->ranks <= host->cores) return wall;
  if (threads != 1 || t.cpu_s <= 0) return wall;
  return std::min(wall, t.cpu_s);
}

}  // namespace infinipipe::runtime
