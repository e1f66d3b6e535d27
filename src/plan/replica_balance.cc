#include "plan/replica_balance.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/planner.h"

namespace infinipipe::plan {

std::vector<std::vector<int64_t>> balance_replicas(std::span<const int64_t> lengths, int64_t dp,
                                                   const cost::CostModel& cm, const Config& cfg) {
  if (dp < 1) fail_config("data-parallel size must be >= 1, got {}", dp);
  if (static_cast<int64_t>(lengths.size()) < dp)
    fail_config(
        "a global batch of {} sequences cannot feed {} data-parallel replicas: raise "
        "--global-batch-size to at least {}",
        lengths.size(), dp, dp);
  const ReplicaSplitCost cost(cfg, cm);
  std::vector<std::pair<double, int64_t>> items;
  for (int64_t l : lengths) items.push_back({cost(l), l});
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  // The first dp sequences lead a replica each (its longest: its chunk limits and its fill).
  // What a lead's replica holds beside it is estimated as its share of the batch less the lead,
  // in tokens of the sequences that lead none.
  double total = 0, rest_cost = 0;
  int64_t rest_tokens = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    total += items[i].first;
    if (static_cast<int64_t>(i) >= dp) {
      rest_cost += items[i].first;
      rest_tokens += items[i].second;
    }
  }
  const double tokens_per_cost = rest_cost > 0 ? static_cast<double>(rest_tokens) / rest_cost : 0;
  const double share = total / static_cast<double>(dp);
  std::vector<std::vector<int64_t>> out(dp);
  std::vector<double> load(dp, 0.0);
  std::vector<ChunkLimit> limit(dp);
  for (const auto& [c, l] : items) {
    // Least loaded replica; among equals the one with fewer sequences.
    size_t best = 0;
    for (size_t r = 1; r < out.size(); ++r)
      if (load[r] < load[best] || (load[r] == load[best] && out[r].size() < out[best].size()))
        best = r;
    if (out[best].empty()) {
      const auto beside = static_cast<int64_t>(std::max(0.0, share - c) * tokens_per_cost);
      limit[best] = cost.lead_limit(l, beside);
      load[best] = cost.fill(limit[best]);
    }
    out[best].push_back(l);
    load[best] += cost.work(l, limit[best]) + cost.recompute(l);
  }
  return out;
}

ReplicaImbalance replica_imbalance(std::span<const double> step_times) {
  if (step_times.empty()) fail("replica imbalance of no replica");
  ReplicaImbalance r;
  double sum = 0;
  for (size_t i = 0; i < step_times.size(); ++i) {
    if (!(step_times[i] >= 0)) fail("replica {} has step time {}", i, step_times[i]);
    sum += step_times[i];
    if (step_times[i] > r.slowest) {
      r.slowest = step_times[i];
      r.slowest_replica = static_cast<int64_t>(i);
    }
  }
  r.mean = sum / static_cast<double>(step_times.size());
  r.ratio = r.mean > 0 ? r.slowest / r.mean : 0;
  return r;
}

std::string replica_imbalance_line(const ReplicaImbalance& r) {
  return fmt::format("replicas: slowest {:.3f} s (replica {}), mean {:.3f} s, slowest/mean {:.3f}",
                     r.slowest, r.slowest_replica, r.mean, r.ratio);
}

}  // namespace infinipipe::plan
