#include "plan/replica_balance.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/model_states.h"
#include "plan/planner.h"
#include "plan/schedule_memory.h"
#include "plan/sequence_processor.h"
#include "plan/stage_layout.h"

namespace infinipipe::plan {

double replica_sequence_cost(const cost::CostModel& cm, int64_t length) {
  const cost::StageShape whole{cm.model().num_layers, false, false};
  const cost::SliceShape s{0, length, true};
  return chunk_cost(cm, whole, std::span<const cost::SliceShape>(&s, 1));
}

std::function<double(int64_t)> replica_sequence_cost_fn(const cost::CostModel& cm) {
  return [cm](int64_t length) { return length > 0 ? replica_sequence_cost(cm, length) : 0.0; };
}

ReplicaSplitCost::ReplicaSplitCost(const Config& cfg, const cost::CostModel& cm) : cm_(cm) {
  const int64_t budget = planner_budget(cfg, cm);
  const MemoryContext mem = plan_memory_context(cfg, budget);
  const int32_t pp = static_cast<int32_t>(cfg.parallel.pipeline_parallel);
  // A forced split (the trainer's) may list virtual stages; a rank holds all of its stages'
  // layers and states, so each rank's stages count as one.
  const auto forced = static_cast<int32_t>(cfg.parallel.stage_layers.size());
  const int32_t vpp = forced > 0 ? std::max(1, forced / pp) : 1;
  std::vector<Stage> ranks(static_cast<size_t>(pp));
  std::vector<int64_t> states(static_cast<size_t>(pp), 0);
  for (const StageSpec& st : stage_layout_planned(cfg, cm, pp, vpp)) {
    const auto r = static_cast<size_t>(st.rank);
    const cost::StageShape sh = stage_shape(st);
    ranks[r].shape.num_layers += sh.num_layers;
    ranks[r].shape.has_embedding = ranks[r].shape.has_embedding || sh.has_embedding;
    ranks[r].shape.has_lm_head = ranks[r].shape.has_lm_head || sh.has_lm_head;
    states[r] += stage_static_bytes(cm, sh, mem);
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    ranks[r].activation_cap = static_cast<double>(budget - states[r]);
    stages_.push_back(ranks[r]);
  }
}

double ReplicaSplitCost::recompute(int64_t length) const {
  if (length <= 0) return 0;
  // One non-final slice of the whole length: a sliced sequence keeps its K/V even where its
  // layers are recomputed (kv_keep_bytes), as the grouping's estimate counts it.
  const cost::SliceShape s{0, length, false};
  const std::span<const cost::SliceShape> one(&s, 1);
  double out = 0;
  for (const Stage& st : stages_) {
    const double keep = static_cast<double>(cm_.kv_keep_bytes(one, st.shape));
    const double full = static_cast<double>(cm_.activation_bytes(one, st.shape, 0)) + keep;
    const double lean =
        static_cast<double>(cm_.activation_bytes(one, st.shape, st.shape.num_layers)) + keep;
    if (full <= st.activation_cap || full <= lean) continue;
    const double need = std::min(1.0, (full - st.activation_cap) / (full - lean));
    out += need * cm_.recompute_time(one, st.shape.num_layers);
  }
  return out;
}

double ReplicaSplitCost::operator()(int64_t length) const {
  return length > 0 ? replica_sequence_cost(cm_, length) + recompute(length) : 0.0;
}

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
