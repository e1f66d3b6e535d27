// Learning-rate schedule with Megatron-LM's OptimizerParamScheduler semantics, counted in samples
// as Megatron counts it: linear warm-up from init_lr (0) to lr over warmup_steps samples, then
// constant / linear / cosine decay from lr to min_lr until decay_steps samples, min_lr afterwards.
// An iteration-based run (--train-iters, --lr-warmup-iters, --lr-decay-iters) has steps =
// iterations × global batch size; a sample-based one (--train-samples, --lr-warmup-samples,
// --lr-decay-samples) gives the samples itself; --lr-warmup-fraction is a share of the decay.
#pragma once

#include <cstdint>

#include "core/config.h"

namespace infinipipe {

struct LrSchedule {
  double max_lr = 3e-4;
  double min_lr = 0.0;
  double init_lr = 0.0;     // Megatron's --lr-warmup-init
  double warmup_steps = 0;  // samples (a fraction of the decay need not be whole)
  int64_t decay_steps = 0;  // samples
  LrDecayStyle style = LrDecayStyle::cosine;

  // Throws ConfigError (naming the flag to change) when the values cannot form a schedule.
  static LrSchedule from_config(const TrainingConfig& cfg);
  void validate() const;

  // The lr of the update that follows `consumed` samples (Megatron's num_steps: the first
  // iteration uses lr_at(0), which is init_lr when there is a warm-up).
  double lr_at(int64_t consumed) const;
};

}  // namespace infinipipe
