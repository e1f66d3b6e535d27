#include "model/lr_schedule.h"

#include <cmath>
#include <numbers>

#include "core/error.h"

namespace infinipipe {

LrSchedule LrSchedule::from_config(const TrainingConfig& cfg) {
  LrSchedule s;
  s.max_lr = cfg.lr;
  s.min_lr = cfg.min_lr;
  const int64_t gbs = cfg.global_batch_size;
  s.decay_steps = cfg.sample_based() ? cfg.decay_samples() : cfg.decay_iters() * gbs;
  if (cfg.lr_warmup_fraction >= 0) {
    s.warmup_steps = cfg.lr_warmup_fraction * static_cast<double>(s.decay_steps);
  } else {
    s.warmup_steps =
        static_cast<double>(cfg.sample_based() ? cfg.lr_warmup_samples : cfg.lr_warmup_iters * gbs);
  }
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
  if (!(warmup_steps >= 0))
    fail_config("the lr warm-up is {} samples, it must be >= 0", warmup_steps);
  if (decay_steps < 0) fail_config("the lr decay is {} samples, it must be >= 0", decay_steps);
  // decay_steps == 0 only happens for --train-iters 0 (nothing is trained, nothing to decay).
  if (decay_steps > 0 && warmup_steps >= static_cast<double>(decay_steps)) {
    fail_config(
        "the lr warm-up ({} samples: --lr-warmup-iters × global batch, --lr-warmup-samples or "
        "--lr-warmup-fraction) must be shorter than the decay ({} samples: --lr-decay-iters, "
        "--lr-decay-samples, or the whole run); shorten the warm-up or lengthen the decay",
        warmup_steps, decay_steps);
  }
}

double LrSchedule::lr_at(int64_t consumed) const {
  const double done = static_cast<double>(consumed < 0 ? 0 : consumed);
  if (warmup_steps > 0 && done <= warmup_steps) {
    return init_lr + (max_lr - init_lr) * done / warmup_steps;
  }
  if (style == LrDecayStyle::constant) return max_lr;
  if (consumed > decay_steps) return min_lr;
  // warmup_steps < consumed <= decay_steps here, so the denominator is positive.
  const double ratio = (done - warmup_steps) / (static_cast<double>(decay_steps) - warmup_steps);
  const double coeff = style == LrDecayStyle::linear
                           ? 1.0 - ratio
                           : 0.5 * (std::cos(std::numbers::pi * ratio) + 1.0);
  return min_lr + coeff * (max_lr - min_lr);
}

}  // namespace infinipipe
