// The driver's checkpoints: where a run starts (a checkpoint, a folder's weights, the seed), and
// a checkpoint of it, every rank its shard: the backend's weights and optimizer state, the cost
// loop's fit, and the run's state (iteration, data position, configuration, tokenizer).
#include <deque>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_folder.h"
#include "core/error.h"
#include "runtime/checkpoint_meta.h"
#include "runtime/run_driver.h"

namespace infinipipe::runtime {

RunStart RunDriver::start_load() {
  const TrainingConfig& tc = cfg_.training;
  RunStart start;
  const std::string& dir = !tc.load.empty() ? tc.load : tc.pretrained_checkpoint;
  if (dir.empty()) return start;
  // Weights only: --pretrained-checkpoint, or a Hugging Face folder, which has no optimizer state
  // nor iteration (the run starts at iteration 0 with a fresh optimizer).
  if (tc.load.empty() || (!checkpoint_find_latest(dir) && hf_folder_is(dir))) {
    backend_.weights_load(dir);
    start.weights_from = dir;
    return start;
  }
  CheckpointReader reader(dir);
  reader.check_model(cfg_.model);
  checkpoint_samples_check(cfg_, reader.rng(), dir);
  backend_.load(reader);
  start.iteration = reader.iteration();
  start.data.consumed_samples = reader.consumed_samples();
  start.data.delay =
      reader.rng().contains("outlier_delay") ? reader.rng().at("outlier_delay") : nlohmann::json();
  cost_loop_.load(reader);
  start.resumed = true;
  return start;
}

void RunDriver::save() {
  const std::string& dir = cfg_.training.save;
  if (dir.empty()) fail_config("saving needs --save DIR");
  CheckpointShard shard;
  std::deque<std::vector<float>> storage;  // split tensors' states, whole, while they are written
  const RunBackend::ShardPlan writer = backend_.shard_fill(shard, storage, iteration_);
  const CheckpointMeta meta = checkpoint_meta(cfg_, opts_.config_yaml, saved_tokenizer_,
                                              iteration_, consumed_samples(),
                                              batches_.position().delay);
  // Every rank: the replicas of a stage gather their fits first.
  cost_loop_.save(shard, writer.every_replica_saves, iteration_);
  if (!rank_.distributed) {
    checkpoint_save(dir, meta, shard);
    return;
  }
  // Every rank writes its shard; `latest` moves only after all finished (one commit, rank 0),
  // and nobody goes on before it did.
  if (writer.writes) checkpoint_save_shard(dir, iteration_, shard);
  collectives_.barrier(fmt::format("saving the checkpoint of iteration {}", iteration_));
  if (rank_.world_rank == 0) checkpoint_commit(dir, meta);
  collectives_.barrier(fmt::format("committing the checkpoint of iteration {}", iteration_));
}

}  // namespace infinipipe::runtime
