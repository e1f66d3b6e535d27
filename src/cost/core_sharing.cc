#include "cost/core_sharing.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace infinipipe::cost {

bool cores_shared(std::span<const RankHost> hosts) {
  return std::any_of(hosts.begin(), hosts.end(),
                     [](const RankHost& h) { return h.ranks > h.cores; });
}

std::vector<double> core_share_speeds(std::span<const RankHost> hosts,
                                      const std::vector<bool>& computing) {
  if (computing.size() != hosts.size())
    fail("internal: core_share_speeds got {} ranks computing for {} hosts", computing.size(),
         hosts.size());
  // Per node: this pipeline's ranks on it, and how many of them compute.
  std::map<int64_t, std::pair<int64_t, int64_t>> node;
  for (size_t k = 0; k < hosts.size(); ++k) {
    auto& [here, busy] = node[hosts[k].node];
    ++here;
    busy += computing[k] ? 1 : 0;
  }
  std::vector<double> speed(hosts.size(), 0.0);
  for (size_t k = 0; k < hosts.size(); ++k) {
    if (!computing[k]) continue;
    const RankHost& h = hosts[k];
    const auto [here, busy] = node.at(h.node);
    if (h.ranks <= h.cores) {
      speed[k] = 1.0;
      continue;
    }
    const double copies = static_cast<double>(std::max(h.ranks, here)) / static_cast<double>(here);
    speed[k] = std::min(1.0, static_cast<double>(h.cores) / (copies * static_cast<double>(busy)));
  }
  return speed;
}

}  // namespace infinipipe::cost
