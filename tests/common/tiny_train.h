// The small Llama the Trainer tests train: `num_layers` × hidden 64, 4 heads in 2 query groups,
// sequences up to 256 tokens, global batch 8 on the CPU, quiet, the cost model not refitted. Not
// yet validated: callers adjust what their test needs, then call validate().
#pragma once

#include <cstdint>
#include <string>

#include "common/tiny_model.h"
#include "runtime/train.h"

namespace infinipipe::testing {

inline runtime::TrainOptions tiny_train_options(int64_t num_layers, int64_t iters,
                                                const std::string& data_path) {
  runtime::TrainOptions o;
  Config& c = o.config;
  c.model = tiny_train_model(num_layers);
  c.parallel.min_tail_slice = 32;
  c.training.global_batch_size = 8;
  c.training.train_iters = iters;
  c.training.data_path = data_path;
  c.cluster.device = "cpu";
  // Tests compare runs bit for bit; plans refitted from measured times would differ between
  // runs (the online refit has its own tests, which turn it on).
  c.training.cost_model_update = CostModelUpdate::off;
  o.config_yaml = "test: true\n";
  o.quiet = true;
  o.out = nullptr;
  o.err = nullptr;
  return o;
}

}  // namespace infinipipe::testing
