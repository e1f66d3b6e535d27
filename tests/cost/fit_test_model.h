// The small model the online-fit tests fit: 8 layers × 256 hidden, GQA 4/2, vocab 1000, its
// prior cost model on the CPU preset, and the time a machine with given coefficients takes.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "cost/cost_model.h"
#include "cost/online_fit.h"

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

// The cost model of a machine whose coefficients are `c` (the 16K-token model).
inline CostModel fit_test_model_with(const Coefficients& c, int64_t ulysses = 1) {
  return CostModel(fit_test_model(16384), device_preset("cpu", false), c, ulysses, false);
}

// What `s` takes on the machine `cm` describes, as a profile would measure it.
inline double fit_test_true_time(const CostModel& cm, const ActionSample& s) {
  return s.backward
             ? cm.backward_time(s.chunk, s.stage) + cm.recompute_time(s.chunk, s.recompute_layers)
             : cm.forward_time(s.chunk, s.stage);
}

}  // namespace infinipipe::cost
