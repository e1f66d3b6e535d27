#include "ckpt/checkpoint_model.h"

#include <vector>

#include "ckpt/checkpoint.h"
#include "core/error.h"

namespace infinipipe {

CheckpointModel checkpoint_load_model(const std::string& dir, MemoryTracker& tracker,
                                      int64_t iteration) {
  if (iteration < 0 && !checkpoint_find_latest(dir)) {
    fail_config(
        "--load {}: no complete checkpoint there (no `latest`, and no iter_NNNNNNN directory "
        "with a state.json); point --load at a directory written by `train --save`",
        dir);
  }
  CheckpointReader reader(dir, iteration);
  CheckpointModel out;
  out.path = reader.path();
  out.iteration = reader.iteration();
  out.config = reader.model();
  // The seed only fills the weights until the load overwrites every one of them.
  out.params = std::make_unique<ModelParams>(out.config, StageRange::whole(out.config), 0, tracker);
  const std::vector<CheckpointTarget> targets = checkpoint_targets(out.params->params());
  reader.load_params(targets);
  return out;
}

}  // namespace infinipipe
