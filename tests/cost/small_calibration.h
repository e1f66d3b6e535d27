// A calibration of a 4-layer, 64-wide model from the cpu preset: what tests of the file's
// optional sections build on.
#pragma once

#include "cost/calibration.h"
#include "cost/cost_model.h"

namespace infinipipe::cost::testing {

inline Calibration small_calibration() {
  Calibration c;
  c.machine = "test-box";
  c.date = "2026-12-01T19:00:00Z";
  c.notes = "unit test";
  c.model.num_layers = 4;
  c.model.hidden_size = 64;
  c.model.num_attention_heads = 4;
  c.model.vocab_size = 257;
  c.model.seq_length = 1024;
  c.device = device_preset("cpu", false);
  c.coeffs = CostModel::derive_coefficients(c.model, c.device, 1, false);
  return c;
}

}  // namespace infinipipe::cost::testing
