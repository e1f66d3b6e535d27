// Learning-rate schedule with Megatron-LM's OptimizerParamScheduler semantics: linear warm-up
// from init_lr (0) to lr over lr_warmup_iters, then constant / linear / cosine decay from lr to
// min_lr over (lr_decay_iters - lr_warmup_iters), min_lr afterwards.
#pragma once

#include <cstdint>

#include "core/config.h"

namespace infinipipe {

struct LrSchedule {
  double max_lr = 3e-4;
  double min_lr = 0.0;
  double init_lr = 0.0;  // Megatron's --lr-warmup-init
  int64_t warmup_iters = 0;
  int64_t decay_iters = 0;
  LrDecayStyle style = LrDecayStyle::cosine;

  // Throws ConfigError (naming the flag to change) when the values cannot form a schedule.
  static LrSchedule from_config(const TrainingConfig& cfg);
  void validate() const;

  // The lr of the update that follows `completed` finished iterations (Megatron's num_steps:
  // iteration 1 uses lr_at(0), which is init_lr when there is a warm-up).
  double lr_at(int64_t completed) const;
};

}  // namespace infinipipe
