// Where a training run starts: a checkpoint (--load), the weights of a folder
// (--pretrained-checkpoint, or --load of a Hugging Face folder), or the seed.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"
#include "runtime/cost_loop.h"
#include "runtime/rank_optimizer.h"
#include "runtime/rank_stages.h"
#include "runtime/run_batches.h"

namespace infinipipe::runtime {

struct TrainStart {
  int64_t iteration = 0;  // completed iterations
  DataPosition data;
  bool resumed = false;      // from a checkpoint: model, optimizer, iteration, data position
  std::string weights_from;  // the folder whose weights started the run at iteration 0
};

// Loads cfg.training.load (the newest complete checkpoint: weights, optimizer state and the cost
// loop's state; or a Hugging Face folder's weights), else cfg.training.pretrained_checkpoint's
// weights, into this rank's parts; nothing when neither is given.
TrainStart train_start_load(const Config& cfg, RankStages& stages, RankOptimizer& optimizer,
                            CostLoop& cost_loop);

}  // namespace infinipipe::runtime
