#include "cost/core_sharing.h"

#include <algorithm>
#include <map>

#include "core/error.h"

namespace infinipipe::cost {

bool cores_shared(std::span<const RankHost> hosts) {
  return std::any_of(hosts.begin(), hosts.end(),
                     [](const RankHost& h) { return h.ranks > h.cores; });
}

std::vector<double> count_distribution(std::span<const double> p) {
  std::vector<double> pmf(p.size() + 1, 0.0);
  pmf[0] = 1.0;
  // Add one event at a time: X' = X + 1 with probability q, X otherwise.
  for (size_t i = 0; i < p.size(); ++i) {
    const double q = std::clamp(p[i], 0.0, 1.0);
    for (size_t x = i + 1; x > 0; --x) pmf[x] = pmf[x] * (1 - q) + pmf[x - 1] * q;
    pmf[0] *= 1 - q;
  }
  return pmf;
}

std::vector<double> core_share_speeds(std::span<const RankHost> hosts,
                                      const std::vector<bool>& computing,
                                      std::span<const double> busy) {
  if (computing.size() != hosts.size() || (!busy.empty() && busy.size() != hosts.size()))
    fail("internal: core_share_speeds got {} ranks computing and {} busy fractions for {} hosts",
         computing.size(), busy.size(), hosts.size());
  // Per node: this pipeline's ranks on it, in rank order, and how many of them compute.
  std::map<int64_t, std::vector<size_t>> mine;
  std::map<int64_t, int64_t> busy_now;
  for (size_t k = 0; k < hosts.size(); ++k) {
    mine[hosts[k].node].push_back(k);
    busy_now[hosts[k].node] += computing[k] ? 1 : 0;
  }
  // Per node: the distribution of the other pipelines' ranks computing there.
  std::map<int64_t, std::vector<double>> others;
  for (const auto& [node, ranks] : mine) {
    const RankHost& h = hosts[ranks.front()];
    const int64_t other = std::max<int64_t>(0, h.ranks - static_cast<int64_t>(ranks.size()));
    std::vector<double> p(static_cast<size_t>(other), 0.0);
    if (!busy.empty())
      for (size_t j = 0; j < p.size(); ++j) p[j] = busy[ranks[j % ranks.size()]];
    others[node] = count_distribution(p);
  }
  std::vector<double> speed(hosts.size(), 0.0);
  for (size_t k = 0; k < hosts.size(); ++k) {
    if (!computing[k]) continue;
    const RankHost& h = hosts[k];
    if (h.ranks <= h.cores) {
      speed[k] = 1.0;
      continue;
    }
    const std::vector<double>& pmf = others.at(h.node);
    const double cores = static_cast<double>(h.cores);
    double s = 0;
    for (size_t x = 0; x < pmf.size(); ++x)
      s += pmf[x] * std::min(1.0, cores / static_cast<double>(busy_now.at(h.node) + int64_t(x)));
    speed[k] = s;
  }
  return speed;
}

}  // namespace infinipipe::cost
