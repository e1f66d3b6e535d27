#include "plan/replica_balance.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/planner.h"
#include "plan/sequence_processor.h"

namespace infinipipe::plan {

double replica_sequence_cost(const cost::CostModel& cm, int64_t length) {
  const cost::StageShape whole{cm.model().num_layers, false, false};
  const cost::SliceShape s{0, length, true};
  return chunk_cost(cm, whole, std::span<const cost::SliceShape>(&s, 1));
}

std::function<double(int64_t)> replica_sequence_cost_fn(const cost::CostModel& cm) {
  return [cm](int64_t length) { return length > 0 ? replica_sequence_cost(cm, length) : 0.0; };
}

std::vector<std::vector<int64_t>> balance_replicas(std::span<const int64_t> lengths, int64_t dp,
                                                   const cost::CostModel& cm) {
  if (dp < 1) fail_config("data-parallel size must be >= 1, got {}", dp);
  if (static_cast<int64_t>(lengths.size()) < dp)
    fail_config(
        "a global batch of {} sequences cannot feed {} data-parallel replicas: raise "
        "--global-batch-size to at least {}",
        lengths.size(), dp, dp);
  std::vector<std::pair<double, int64_t>> items;
  for (int64_t l : lengths) items.push_back({replica_sequence_cost(cm, l), l});
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::vector<int64_t>> out(dp);
  std::vector<double> load(dp, 0.0);
  for (const auto& [c, l] : items) {
    // Least loaded replica; among equals the one with fewer sequences.
    size_t best = 0;
    for (size_t r = 1; r < out.size(); ++r)
      if (load[r] < load[best] || (load[r] == load[best] && out[r].size() < out[best].size()))
        best = r;
    out[best].push_back(l);
    load[best] += c;
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
