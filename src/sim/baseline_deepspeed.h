// DeepSpeed-Ulysses as the InfiniPipe paper ran it (§V-A): a GIVEN sequence-parallel degree that
// may span nodes, ZeRO-3 over the whole cluster, a static number of recomputed layers, sequences
// packed to the maximum length. Unlike `ulysses` (sim/ulysses.h), nothing is tuned, and a degree
// that does not divide the heads runs with DeepSpeed's uneven head split (the busiest device has
// ceil(heads / sp) heads). docs/cost-model.md, "deepspeed".
#pragma once

#include <cstdint>
#include <span>

#include "sim/baseline.h"

namespace infinipipe::sim {

struct DeepSpeedSetting {
  int64_t sp = 8;                  // sequence-parallel degree; dp = devices / sp
  int64_t recompute_layers = -1;   // -1 = every layer
  int64_t micro_batch_tokens = 0;  // packing capacity; 0 = the model's seq-length
};

// Layers DeepSpeed and FlexSP recompute in the paper (§V-A): 36 for 30B, none for 7B and 13B.
int64_t zero3_paper_recompute_layers(const ModelConfig& model);

// The paper's degree for the nearest of its model sizes: 16 for 7B, 32 for 13B and 30B
// (capped at the devices); zero3_paper_recompute_layers layers recomputed.
DeepSpeedSetting deepspeed_paper_setting(const ModelConfig& model, int64_t devices);

// One micro-batch on one sp group: compute (uneven heads included), the all-to-alls, and the
// activation memory it needs with `recompute_layers` layers recomputed.
struct SpMicroBatch {
  double compute = 0, alltoall = 0;
  double zero3_exposed = 0;  // ZeRO-3 over every device, per unit (zero3_micro_batch_exposed)
  int64_t activation_bytes = 0;
};
// DeepSpeed's default reduce_bucket_size (deepspeed/runtime/zero/config.py: 500,000,000
// elements): ZeRO-3 reduce-scatters the gradients a bucket at a time.
inline constexpr double kDeepSpeedReduceBucketParams = 5e8;

// `reduce_bucket_params`: DeepSpeed's bucket (kDeepSpeedReduceBucketParams) or 0, a
// reduce-scatter per unit as FSDP (FlexSP's Hetu-Galvatron) runs it.
SpMicroBatch sp_micro_batch(const cost::CostModel& cm, const Config& cfg, int64_t sp,
                            std::span<const cost::SliceShape> chunk, int64_t recompute_layers,
                            double reduce_bucket_params);

// Throws ConfigError when the setting cannot run (sp does not divide the devices or exceeds the
// heads, recompute outside [0, layers], capacity below the longest sequence).
BaselineResult simulate_deepspeed(const cost::CostModel& cm, const Config& cfg,
                                  std::span<const int64_t> batch, const DeepSpeedSetting& setting);

}  // namespace infinipipe::sim
