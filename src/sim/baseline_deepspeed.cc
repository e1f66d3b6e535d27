// DeepSpeed-Ulysses + ZeRO-3 with a given degree. Per micro-batch on one sp group: the whole
// model's forward, backward and recompute with the work split over sp devices, 4 all-to-alls per
// layer and pass (data dependencies, on the critical path), and ZeRO-3's two parameter
// all-gathers over all devices, prefetched a unit ahead, and its gradients reduce-scattered in
// DeepSpeed's buckets, so only what compute does not hide (and the last bucket) is exposed. The dp
// groups advance in lock step (ZeRO-3's collectives span them all), so a round costs its slowest
// micro-batch.
#include "sim/baseline_deepspeed.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace infinipipe::sim {

int64_t zero3_paper_recompute_layers(const ModelConfig& m) {
  // §V-A: "for DeepSpeed and FlexSP, we checkpoint 36 layers for 30B model and none for the
  // other model sizes" (of the 30B's 60 layers; capped for a smaller model of that class).
  return paper_model_size(m) == PaperModelSize::b30 ? std::min<int64_t>(36, m.num_layers) : 0;
}

DeepSpeedSetting deepspeed_paper_setting(const ModelConfig& m, int64_t devices) {
  DeepSpeedSetting s;
  s.sp = std::min<int64_t>(paper_model_size(m) == PaperModelSize::b7 ? 16 : 32, devices);
  s.recompute_layers = zero3_paper_recompute_layers(m);
  return s;
}

SpMicroBatch sp_micro_batch(const cost::CostModel& cm, const Config& cfg, int64_t sp,
                            std::span<const cost::SliceShape> chunk, int64_t R,
                            double reduce_bucket_params) {
  const ModelConfig& m = cm.model();
  const int64_t L = m.num_layers;
  const cost::CostModel g = cm.with_ulysses_degree(sp, cfg.cluster.devices_per_node);
  const cost::StageShape all{.num_layers = L, .has_embedding = true, .has_lm_head = true};
  SpMicroBatch r;
  r.alltoall = g.ulysses_alltoall_time(cost::chunk_tokens(chunk)) * static_cast<double>(2 * L + R);
  r.compute = g.forward_time(chunk, all) + g.backward_time(chunk, all) +
              g.recompute_time(chunk, R) - r.alltoall;
  // Uneven heads: the device with ceil(H/sp) heads sets the pace of every attention.
  const double heads = static_cast<double>(m.num_attention_heads);
  const double busiest =
      static_cast<double>((m.num_attention_heads + sp - 1) / sp) * static_cast<double>(sp) / heads;
  const cost::Coefficients& c = g.coefficients();
  r.compute += (busiest - 1) * g.attention_seconds(chunk) *
               (static_cast<double>(L) * (1 + c.backward_factor) +
                static_cast<double>(R) * c.recompute_factor);
  r.zero3_exposed = zero3_micro_batch_exposed(g, cfg, chunk, reduce_bucket_params);
  r.activation_bytes =
      g.activation_bytes(chunk, all, R) +
      std::max(g.forward_transient_bytes(chunk, all), g.backward_transient_bytes(chunk, all, R));
  return r;
}

BaselineResult simulate_deepspeed(const cost::CostModel& cm, const Config& cfg,
                                  std::span<const int64_t> batch, const DeepSpeedSetting& setting) {
  baseline_check_batch(batch, "deepspeed");
  const ModelConfig& m = cm.model();
  const int64_t n = cfg.cluster.num_devices, sp = setting.sp;
  const int64_t R = setting.recompute_layers < 0 ? m.num_layers : setting.recompute_layers;
  const int64_t cap = setting.micro_batch_tokens > 0 ? setting.micro_batch_tokens : m.seq_length;
  const int64_t longest = *std::max_element(batch.begin(), batch.end());
  if (sp < 1 || n % sp != 0)
    fail_config("deepspeed: sp {} must divide the {} devices (--deepspeed-sp)", sp, n);
  if (sp > m.num_attention_heads)
    fail_config("deepspeed: sp {} exceeds the {} attention heads (--deepspeed-sp)", sp,
                m.num_attention_heads);
  if (setting.recompute_layers < -1 || R > m.num_layers)
    fail_config("deepspeed: recompute layers {} must be in [0, {}] (--deepspeed-recompute-layers)",
                R, m.num_layers);
  if (cap < longest)
    fail_config("deepspeed: packing capacity {} is below the longest sequence ({} tokens)", cap,
                longest);
  const int64_t dp = n / sp;
  std::vector<SpMicroBatch> mbs;
  for (const auto& chunk : baseline_pack(batch, cap))
    mbs.push_back(sp_micro_batch(cm, cfg, sp, chunk, R, kDeepSpeedReduceBucketParams));
  std::sort(mbs.begin(), mbs.end(), [](const SpMicroBatch& a, const SpMicroBatch& b) {
    return a.compute + a.alltoall > b.compute + b.alltoall;
  });
  BaselineResult r;
  r.setting =
      fmt::format("sp={}, dp={}, mb={}K tok, {} layers recomputed, ZeRO-3", sp, dp, cap / 1024, R);
  int64_t act = 0;
  for (size_t i = 0; i < mbs.size(); i += static_cast<size_t>(dp)) {
    r.compute_time_s += mbs[i].compute;
    r.parts.a2a += mbs[i].alltoall;
    r.parts.zero += mbs[i].zero3_exposed;
  }
  r.comm_exposed_s = r.parts.a2a + r.parts.zero;
  for (const SpMicroBatch& mb : mbs) act = std::max(act, mb.activation_bytes);
  r.optimizer_time_s =
      optimizer_seconds(cm, static_cast<double>(m.params_total()) / static_cast<double>(n));
  r.parts.others = r.compute_time_s + r.optimizer_time_s;
  r.step_time_s = r.compute_time_s + r.comm_exposed_s + r.optimizer_time_s;
  r.peak_memory_bytes = zero3_static_bytes(cm, n) + act;
  baseline_finish(cm, cfg, batch, r);
  return r;
}

}  // namespace infinipipe::sim
