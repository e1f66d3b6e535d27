// The small Llama the layout-search tests plan on A800 clusters: 8 layers, 8 heads, sequences
// up to 16K, so every layout of a small cluster plans fast.
#pragma once

#include <cstdint>

#include "core/config.h"

namespace infinipipe::testing {

inline Config small_layout_model(int64_t devices, int64_t per_node, int64_t global_batch) {
  Config cfg;
  cfg.model.num_layers = 8;
  cfg.model.hidden_size = 1024;
  cfg.model.num_attention_heads = 8;
  cfg.model.vocab_size = 32000;
  cfg.model.seq_length = 16384;
  cfg.model.tie_embeddings = false;
  cfg.cluster.device = "a800-80gb";
  cfg.cluster.num_devices = devices;
  cfg.cluster.devices_per_node = per_node;
  cfg.training.bf16 = true;
  cfg.training.global_batch_size = global_batch;
  return cfg;
}

}  // namespace infinipipe::testing
