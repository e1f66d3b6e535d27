// Optimizers (AdamW as torch.optim.AdamW, plain SGD) and global gradient-norm clipping.
// They work on a neutral view of parameters (OptimTensor), so they know nothing of the model's
// layout: a pipeline stage simply passes the parameters it owns, by global name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"

namespace infinipipe {

// One parameter as the optimizer sees it: global (Hugging Face) name, shape, values, gradient.
struct OptimTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::span<float> value;
  std::span<float> grad;  // mutable: clipping scales it in place
};

// Megatron excludes biases and norm weights (every 1-D tensor) from weight decay.
bool optim_has_weight_decay(const OptimTensor& t);

struct OptimizerOptions {
  Optimizer kind = Optimizer::adamw;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;

  static OptimizerOptions from_config(const TrainingConfig& cfg);
  void validate() const;  // throws ConfigError naming the flag
};

// The state of one parameter. AdamW: both moments; SGD: empty moments (only the step count).
struct OptimState {
  std::vector<float> exp_avg;     // m, first moment
  std::vector<float> exp_avg_sq;  // v, second moment
  int64_t step = 0;               // updates applied to this parameter so far
};

class ParamOptimizer {
 public:
  // Accounting hook: called with +bytes when state memory is allocated and -bytes when it is
  // released, so the engine's allocator can report optimizer memory.
  using AccountFn = std::function<void(int64_t delta_bytes)>;

  explicit ParamOptimizer(const OptimizerOptions& opts, AccountFn account = {});
  ~ParamOptimizer();
  ParamOptimizer(const ParamOptimizer&) = delete;
  ParamOptimizer& operator=(const ParamOptimizer&) = delete;

  // One update of every tensor with learning rate `lr`. State starts at zero the first time a
  // name is seen. Each element is updated independently, so threads never change the result.
  void step(std::span<const OptimTensor> tensors, double lr);

  const OptimizerOptions& options() const { return opts_; }
  bool has_state(const std::string& name) const { return states_.count(name) > 0; }
  const OptimState& state(const std::string& name) const;  // Error when the name has none
  // Installs state read from a checkpoint; moment sizes must be `numel` (AdamW) or empty (SGD).
  void set_state(const std::string& name, int64_t numel, OptimState state);
  std::vector<std::string> state_names() const;  // sorted
  int64_t state_bytes() const { return bytes_; }

 private:
  OptimState& state_for(const OptimTensor& t);
  void account(int64_t delta);

  OptimizerOptions opts_;
  AccountFn account_;
  std::map<std::string, OptimState> states_;
  int64_t bytes_ = 0;
};

// Global gradient-norm clipping in three parts, so the distributed runtime can all-reduce the
// partial sum of squares across ranks between the first call and the last two.
// Sum of squares of every gradient element, in double, in a fixed order (deterministic).
double grad_sum_squares(std::span<const OptimTensor> tensors);
double grad_norm(std::span<const OptimTensor> tensors);  // sqrt(grad_sum_squares), one rank
// Megatron's coefficient: max_norm / (total_norm + 1e-6) when that is < 1, else 1 (no clipping;
// also 1 when max_norm <= 0, which disables clipping).
double grad_clip_scale(double total_norm, double max_norm);
void grad_apply_scale(std::span<const OptimTensor> tensors, double scale);
// One rank: computes the norm, clips to max_norm (0 = off), returns the norm before clipping.
double grad_clip_norm(std::span<const OptimTensor> tensors, double max_norm);

}  // namespace infinipipe
