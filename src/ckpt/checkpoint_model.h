// The whole model of a checkpoint in one process: every stage's weights, whatever pp × dp wrote
// them, loaded by name into one ModelParams of all layers (what `infinipipe generate` runs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/config.h"
#include "model/memory.h"
#include "model/params.h"

namespace infinipipe {

struct CheckpointModel {
  std::string path;  // DIR/iter_NNNNNNN it was read from
  int64_t iteration = 0;
  ModelConfig config;  // from its config.json
  std::unique_ptr<ModelParams> params;
};

// iteration < 0: the newest complete checkpoint under dir. ConfigError when dir holds none;
// Error when a file is damaged or a tensor is missing.
CheckpointModel checkpoint_load_model(const std::string& dir, MemoryTracker& tracker,
                                      int64_t iteration = -1);

}  // namespace infinipipe
