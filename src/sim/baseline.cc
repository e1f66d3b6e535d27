#include "sim/baseline.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/model_states.h"

namespace infinipipe::sim {

PaperModelSize paper_model_size(const ModelConfig& m) {
  const double params = static_cast<double>(m.params_total());
  return params < 10e9 ? PaperModelSize::b7 : params < 20e9 ? PaperModelSize::b13
                                                             : PaperModelSize::b30;
}

std::vector<std::vector<cost::SliceShape>> baseline_pack(std::span<const int64_t> lengths,
                                                         int64_t capacity) {
  std::vector<int64_t> sorted(lengths.begin(), lengths.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  std::vector<std::vector<cost::SliceShape>> bins;
  std::vector<int64_t> used;
  for (int64_t len : sorted) {
    int64_t best = -1;
    for (size_t b = 0; b < bins.size(); ++b)
      if (used[b] + len <= capacity && (best < 0 || used[b] > used[best]))
        best = static_cast<int64_t>(b);
    if (best < 0) {
      bins.emplace_back();
      used.push_back(0);
      best = static_cast<int64_t>(bins.size()) - 1;
    }
    bins[best].push_back({0, len});
    used[best] += len;
  }
  return bins;
}

double zero3_micro_batch_exposed(const cost::CostModel& g, const Config& cfg,
                                 std::span<const cost::SliceShape> chunk,
                                 double reduce_bucket_params) {
  Config whole = cfg;  // one stage of every layer, its ZeRO-3 group every device
  whole.parallel.zero_stage = 3;
  whole.parallel.pipeline_parallel = 1;
  whole.parallel.ulysses_degree = 1;
  whole.parallel.data_parallel = cfg.cluster.num_devices;
  const cost::StageShape all{
      .num_layers = g.model().num_layers, .has_embedding = true, .has_lm_head = true};
  return plan::zero3_forward_exposed_seconds(g, whole, chunk, all, 0) +
         plan::zero3_backward_exposed_seconds(g, whole, chunk, all, 0, reduce_bucket_params);
}

int64_t zero3_static_bytes(const cost::CostModel& cm, int64_t devices) {
  const ModelConfig& m = cm.model();
  const double gathered = (2.0 * static_cast<double>(m.params_per_layer()) +
                           static_cast<double>(m.params_embedding())) *
                          (cm.bf16() ? 2.0 : 4.0);
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(m.params_total()) * cm.coefficients().bytes_per_param /
                    static_cast<double>(devices) +
                gathered));
}

double optimizer_seconds(const cost::CostModel& cm, double params) {
  return 2 * params * cm.coefficients().bytes_per_param / cm.device().memory_bandwidth;
}

void baseline_finish(const cost::CostModel& cm, const Config& cfg, std::span<const int64_t> batch,
                     BaselineResult& r) {
  const ModelConfig& m = cm.model();
  int64_t tokens = 0;
  double flops = 0;
  for (int64_t len : batch) {
    tokens += len;
    const cost::SliceShape s{0, len};
    flops += 3 * cm.flops(std::span<const cost::SliceShape>(&s, 1), m.num_layers, true);
  }
  r.tokens_per_s = static_cast<double>(tokens) / r.step_time_s;
  r.mfu = flops /
          (r.step_time_s * static_cast<double>(cfg.cluster.num_devices) * cm.device().peak_flops);
  r.memory_budget_bytes =
      cfg.training.memory_budget > 0 ? cfg.training.memory_budget
                                     : cost::usable_memory_bytes(cm.device());
  r.oom = r.peak_memory_bytes > r.memory_budget_bytes;
  if (r.oom)
    r.reason = fmt::format("needs {} per device ({}) but the budget is {}",
                           format_bytes(r.peak_memory_bytes), r.setting,
                           format_bytes(r.memory_budget_bytes));
}

void baseline_check_batch(std::span<const int64_t> lengths, const char* who) {
  if (lengths.empty()) fail_config("{}: the global batch has no sequences", who);
  for (int64_t len : lengths)
    if (len <= 0) fail_config("{}: sequence length {} must be positive", who, len);
}

}  // namespace infinipipe::sim
