// The small model the online-fit tests fit: 8 layers × 256 hidden, GQA 4/2, vocab 1000, and its
// prior cost model on the CPU preset.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::cost {

inline ModelConfig fit_test_model(int64_t seq_length) {
  ModelConfig m;
  m.num_layers = 8;
  m.hidden_size = 256;
  m.num_attention_heads = 4;
  m.num_query_groups = 2;
  m.vocab_size = 1000;
  m.seq_length = seq_length;
  return m;
}

inline CostModel fit_test_prior(int64_t seq_length) {
  return CostModel(fit_test_model(seq_length), device_preset("cpu", false), 1, false);
}

}  // namespace infinipipe::cost
