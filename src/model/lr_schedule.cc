#include "model/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace infinipipe {

LrSchedule LrSchedule::from_config(const TrainingConfig& cfg) {
  LrSchedule s;
  s.max_lr = cfg.lr;
  s.min_lr = cfg.min_lr;
  s.warmup_iters = cfg.lr_warmup_iters;
  s.decay_iters = cfg.decay_iters();
  s.style = cfg.lr_decay_style;
  s.validate();
  return s;
}

void LrSchedule::validate() const {
  if (!(min_lr >= 0.0)) fail_config("--min-lr is {}, it must be >= 0", min_lr);
  if (!(max_lr >= min_lr)) {
    fail_config("--lr ({}) is smaller than --min-lr ({}); raise --lr or lower --min-lr", max_lr,
                min_lr);
  }
  if (!(init_lr >= 0.0 && init_lr <= max_lr)) {
    fail_config("the warm-up start lr ({}) must lie in [0, --lr = {}]", init_lr, max_lr);
  }
  if (warmup_iters < 0) fail_config("--lr-warmup-iters is {}, it must be >= 0", warmup_iters);
  if (decay_iters < 0) fail_config("--lr-decay-iters is {}, it must be >= 0", decay_iters);
  // decay_iters == 0 only happens for --train-iters 0 (nothing is trained, nothing to decay).
  if (decay_iters > 0 && warmup_iters >= decay_iters) {
    fail_config(
        "--lr-warmup-iters ({}) must be smaller than --lr-decay-iters ({}, which defaults to "
        "--train-iters); shorten the warm-up or lengthen the decay",
        warmup_iters, decay_iters);
  }
}

double LrSchedule::lr_at(int64_t completed) const {
  if (completed < 0) completed = 0;
  if (warmup_iters > 0 && completed <= warmup_iters) {
    return init_lr +
           (max_lr - init_lr) * static_cast<double>(completed) / static_cast<double>(warmup_iters);
  }
  if (style == LrDecayStyle::constant) return max_lr;
  if (completed > decay_iters) return min_lr;
  // warmup_iters < completed <= decay_iters here, so the denominator is positive.
  const double ratio = static_cast<double>(completed - warmup_iters) /
                       static_cast<double>(decay_iters - warmup_iters);
  const double coeff = style == LrDecayStyle::linear
                           ? 1.0 - ratio
                           : 0.5 * (std::cos(std::numbers::pi * ratio) + 1.0);
  return min_lr + coeff * (max_lr - min_lr);
}

}  // namespace infinipipe
