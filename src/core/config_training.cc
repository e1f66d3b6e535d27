// TrainingConfig's checks of what Megatron-LM keeps apart: iteration-based against sample-based
// counts (--train-iters / --lr-*-iters against --train-samples / --lr-*-samples), and the data
// flags (--data-path with --split against the per-split paths), plus evaluation.
#include <cmath>

#include "core/config.h"
#include "core/error.h"

namespace infinipipe {

void TrainingConfig::resolve_train_iters() {
  if (train_samples > 0 && global_batch_size > 0) train_iters = train_samples / global_batch_size;
}

void TrainingConfig::validate_units() const {
  if (train_samples < 0) fail_config("train-samples must be >= 0 (0 = by --train-iters)");
  if (lr_warmup_samples < 0) fail_config("lr-warmup-samples must be >= 0");
  if (lr_decay_samples < 0) fail_config("lr-decay-samples must be >= 0 (0 = train-samples)");
  const bool fraction = lr_warmup_fraction >= 0;
  if (fraction && !(lr_warmup_fraction < 1.0)) {
    fail_config("lr-warmup-fraction {} must lie in [0, 1): a fraction of the decay length",
                lr_warmup_fraction);
  }
  if (!sample_based()) {
    if (lr_warmup_samples > 0 || lr_decay_samples > 0) {
      fail_config(
          "--lr-warmup-samples / --lr-decay-samples count samples, but the run counts iterations "
          "(--train-iters); use --lr-warmup-iters / --lr-decay-iters, or train by --train-samples");
    }
    if (fraction && lr_warmup_iters > 0) {
      fail_config("give only one of --lr-warmup-fraction and --lr-warmup-iters");
    }
    return;
  }
  if (lr_warmup_iters > 0 || lr_decay_iters > 0) {
    fail_config(
        "--lr-warmup-iters / --lr-decay-iters count iterations, but the run counts samples "
        "(--train-samples); use --lr-warmup-samples / --lr-decay-samples, or train by "
        "--train-iters");
  }
  if (fraction && lr_warmup_samples > 0) {
    fail_config("give only one of --lr-warmup-fraction and --lr-warmup-samples");
  }
  if (train_samples < global_batch_size) {
    fail_config("train-samples {} is less than one global batch ({}): raise --train-samples",
                train_samples, global_batch_size);
  }
  if (lr_warmup_samples > 0 && lr_warmup_samples >= decay_samples()) {
    fail_config(
        "lr-warmup-samples {} must be smaller than the decay length {} (lr-decay-samples, which "
        "defaults to train-samples)",
        lr_warmup_samples, decay_samples());
  }
}

void TrainingConfig::validate_data() const {
  const bool per_split =
      !train_data_path.empty() || !valid_data_path.empty() || !test_data_path.empty();
  if (!data_path.empty() && per_split) {
    fail_config(
        "give either --data-path (cut by --split) or --train-data-path / --valid-data-path / "
        "--test-data-path, not both");
  }
  if (per_split && train_iters > 0 && train_data_path.empty()) {
    fail_config("--valid-data-path / --test-data-path need --train-data-path to train on");
  }
  if (eval_interval <= 0) {
    fail_config("eval-interval must be positive, got {}; turn evaluation off with --eval-iters 0",
                eval_interval);
  }
  if (eval_iters < 0) fail_config("eval-iters must be >= 0 (0 = no evaluation)");
}

}  // namespace infinipipe
