// The tiny Llama the engine tests run: 32 wide, 4 heads in 2 query groups (GQA), vocabulary 37, so
// a whole forward and backward takes milliseconds and every gradient can be checked; and the
// small one the Trainer and executor tests run, 64 wide.
#pragma once

#include <cstdint>

#include "core/config.h"

namespace infinipipe::testing {

inline ModelConfig tiny_model_config(int64_t num_layers, int64_t seq_length) {
  ModelConfig cfg;
  cfg.num_layers = num_layers;
  cfg.hidden_size = 32;
  cfg.num_attention_heads = 4;
  cfg.num_query_groups = 2;
  cfg.ffn_hidden_size = 48;
  cfg.vocab_size = 37;
  cfg.seq_length = seq_length;
  return cfg;
}

// `num_layers` × hidden 64, 4 heads in 2 query groups (GQA), sequences up to 256 tokens, the
// default vocabulary: the model of tiny_train_options (tiny_train.h) and the executor tests.
inline ModelConfig tiny_train_model(int64_t num_layers) {
  ModelConfig m;
  m.num_layers = num_layers;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.num_query_groups = 2;
  m.seq_length = 256;
  return m;
}

}  // namespace infinipipe::testing
