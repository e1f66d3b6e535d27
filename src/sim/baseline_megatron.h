// Megatron-LM as the InfiniPipe paper ran it (§V-A): tensor parallelism inside a node x context
// parallelism across nodes x data parallelism, no pipeline, a fixed number of fully recomputed
// layers, sequences packed to the maximum length. docs/cost-model.md, "megatron".
#pragma once

#include <cstdint>
#include <span>

#include "sim/baseline.h"

namespace infinipipe::sim {

struct MegatronSetting {
  int64_t tp = 8;                  // tensor parallel (all-gather / reduce-scatter per layer)
  int64_t cp = 1;                  // context parallel (ring exchange of K/V per layer)
  int64_t recompute_layers = 0;    // layers fully recomputed (--recompute-num-layers)
  int64_t micro_batch_tokens = 0;  // packing capacity; 0 = the model's seq-length
};

// The paper's setting for the nearest of its model sizes: 7B tp 8 cp 2, 10 layers recomputed;
// 13B tp 8 cp 4, 20 layers; 30B tp 8 cp 4, 55 layers (capped at the model's layers); ZeRO-1.
// Where tp does not divide the heads (LLaMA 30B: 52) it halves and cp doubles.
MegatronSetting megatron_paper_setting(const ModelConfig& model);

// Throws ConfigError when the setting cannot run (tp x cp does not divide the devices, tp does
// not divide the heads, recompute outside [0, layers], capacity below the longest sequence).
BaselineResult simulate_megatron(const cost::CostModel& cm, const Config& cfg,
                                 std::span<const int64_t> batch, const MegatronSetting& setting);

}  // namespace infinipipe::sim
