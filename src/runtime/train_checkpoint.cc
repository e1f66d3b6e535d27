// The Trainer's saved state: where a run starts (a checkpoint, a folder's weights, the seed), and
// a checkpoint of it (every rank its shard).
#include "runtime/train_checkpoint.h"

#include <deque>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_folder.h"
#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "core/error.h"
#include "runtime/checkpoint_meta.h"
#include "runtime/train.h"

namespace infinipipe::runtime {

namespace {

// Weights only: every stage's parameters (tied copies included) from a Hugging Face folder or
// the newest infinipipe checkpoint; the run starts at iteration 0 with a fresh optimizer.
TrainStart weights_load(const std::string& dir, const ModelConfig& model, RankStages& stages) {
  const std::vector<CheckpointTarget> targets = checkpoint_targets(stages.params_every_stage());
  if (hf_folder_is(dir)) {
    HfModelReader reader(dir);
    reader.check_model(model);
    reader.load_params(targets);
  } else {
    CheckpointReader reader(dir);
    reader.check_model(model);
    reader.load_params(targets);
  }
  TrainStart start;
  start.weights_from = dir;
  return start;
}

TrainStart checkpoint_load(const std::string& dir, const Config& cfg, RankStages& stages,
                           RankOptimizer& optimizer, CostLoop& cost_loop) {
  const ModelConfig& model = cfg.model;
  // A Hugging Face folder has no optimizer state nor iteration: it starts a run, as
  // --pretrained-checkpoint does.
  if (!checkpoint_find_latest(dir) && hf_folder_is(dir)) return weights_load(dir, model, stages);
  CheckpointReader reader(dir);
  reader.check_model(model);
  checkpoint_samples_check(cfg, reader.rng(), dir);
  // Every stage's parameters, tied copies included, so all of them get the saved values.
  reader.load_params(checkpoint_targets(stages.params_every_stage()));
  optimizer.load(reader);
  TrainStart start;
  start.iteration = reader.iteration();
  start.data.consumed_samples = reader.consumed_samples();
  start.data.delay =
      reader.rng().contains("outlier_delay") ? reader.rng().at("outlier_delay") : nlohmann::json();
  cost_loop.load(reader);
  start.resumed = true;
  return start;
}

}  // namespace

TrainStart train_start_load(const Config& cfg, RankStages& stages, RankOptimizer& optimizer,
                            CostLoop& cost_loop) {
  if (!cfg.training.load.empty())
    return checkpoint_load(cfg.training.load, cfg, stages, optimizer, cost_loop);
  if (!cfg.training.pretrained_checkpoint.empty())
    return weights_load(cfg.training.pretrained_checkpoint, cfg.model, stages);
  return {};
}

void Trainer::save() {
  const std::string& dir = cfg_.training.save;
  if (dir.empty()) fail_config("saving needs --save DIR");
  CheckpointShard shard;
  // With data parallelism the replicas hold the same values: replica 0 writes them.
  const bool replica0 = !groups_ || groups_->layout().replica == 0;
  if (replica0) shard.params = checkpoint_tensors(stages_.params());
  std::deque<std::vector<float>> gathered;  // split tensors' states, whole, while they are written
  optimizer_.save(shard, gathered);
  const CheckpointMeta meta = checkpoint_meta(cfg_, config_yaml_, saved_tokenizer_, iteration_,
                                              consumed_samples(), batches_.position().delay);
  if (!groups_) {
    cost_loop_.save(shard, optimizer_.every_replica_saves(), iteration_);
    checkpoint_save(dir, meta, shard);
    return;
  }
  // Every rank writes its shard; `latest` moves only after all finished (one commit, rank 0),
  // and nobody goes on before it did.
  Comm& comm = groups_->comm();
  const RankLayout& layout = groups_->layout();
  if (optimizer_.every_replica_saves()) {
    // Every replica saves the whole states of the parameters whose first element it holds; the
    // model files are replica 0's, one per pipeline rank.
    shard.rank = comm.rank();
    shard.num_ranks = comm.size();
    shard.model_part = layout.stage;
    shard.model_parts = layout.pp;
  } else {
    // Replica 0 of each pipeline rank is the only writer: the others hold nothing of their own.
    shard.rank = layout.stage;
    shard.num_ranks = layout.pp;
  }
  // Every rank: the replicas of a stage gather their fits first.
  cost_loop_.save(shard, optimizer_.every_replica_saves(), iteration_);
  if (optimizer_.every_replica_saves() || replica0) checkpoint_save_shard(dir, iteration_, shard);
  comm.barrier(fmt::format("saving the checkpoint of iteration {}", iteration_));
  if (comm.rank() == 0) checkpoint_commit(dir, meta);
  comm.barrier(fmt::format("committing the checkpoint of iteration {}", iteration_));
}

}  // namespace infinipipe::runtime
