// The Trainer's saved state: resume from a checkpoint, save one (every rank its shard).
#include <deque>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_folder.h"
#include "comm/mpi_comm.h"
#include "core/error.h"
#include "runtime/checkpoint_meta.h"
#include "runtime/train.h"

namespace infinipipe::runtime {

// Weights only: every engine's parameters (tied copies included) from a Hugging Face folder or
// the newest infinipipe checkpoint; the run starts at iteration 0 with a fresh optimizer.
void Trainer::weights_load(const std::string& dir) {
  std::vector<ParamRef> all;
  for (auto& e : engines_) {
    for (ParamRef& p : e->params().params()) all.push_back(p);
  }
  const std::vector<CheckpointTarget> targets = checkpoint_targets(all);
  if (hf_folder_is(dir)) {
    HfModelReader reader(dir);
    reader.check_model(cfg_.model);
    reader.load_params(targets);
  } else {
    CheckpointReader reader(dir);
    reader.check_model(cfg_.model);
    reader.load_params(targets);
  }
  weights_from_ = dir;
}

void Trainer::checkpoint_load(const std::string& dir) {
  // A Hugging Face folder has no optimizer state nor iteration: it starts a run, as
  // --pretrained-checkpoint does.
  if (!checkpoint_find_latest(dir) && hf_folder_is(dir)) {
    weights_load(dir);
    return;
  }
  CheckpointReader reader(dir);
  reader.check_model(cfg_.model);
  // Every engine's parameters, tied copies included, so all of them get the saved values.
  std::vector<ParamRef> all;
  for (auto& e : engines_) {
    for (ParamRef& p : e->params().params()) all.push_back(p);
  }
  const std::vector<CheckpointTarget> targets = checkpoint_targets(all);
  reader.load_params(targets);
  // A tied copy on this rank is trained here too: it takes the embedding's state.
  const std::vector<CheckpointTarget> unique = checkpoint_targets(params_local());
  if (dist_optimizer_) {
    reader.load_optimizer(dist_optimizer_->load_slices(unique), *optimizer_);
  } else {
    reader.load_optimizer(unique, *optimizer_);
  }
  iteration_ = reader.iteration();
  start_consumed_ = reader.consumed_samples();
  start_delay_ =
      reader.rng().contains("outlier_delay") ? reader.rng().at("outlier_delay") : nlohmann::json();
  fit_state_load(reader);
  resumed_ = true;
}

void Trainer::save() {
  const std::string& dir = cfg_.training.save;
  if (dir.empty()) fail_config("saving needs --save DIR");
  CheckpointShard shard;
  // With data parallelism the replicas hold the same values: replica 0 writes them.
  const bool replica0 = !groups_ || groups_->layout().replica == 0;
  if (replica0) shard.params = checkpoint_tensors(params());
  shard.optimizer = optimizer_.get();
  std::deque<std::vector<float>> gathered;  // split tensors' states, whole, while they are written
  if (dist_optimizer_) {
    // The tied copy's state is the embedding's, saved by the first stage.
    const float* copy = tied_copy_values().data();
    shard.optimizer_states = dist_optimizer_->states_for_save(
        optim_tensors(), *optimizer_,
        [copy](const OptimTensor& t) { return copy == nullptr || t.value.data() != copy; },
        gathered);
  }
  const CheckpointMeta meta = checkpoint_meta(cfg_, config_yaml_, saved_tokenizer_, iteration_,
                                              consumed_samples(), delay_state());
  if (!groups_) {
    fit_state_save(shard);
    checkpoint_save(dir, meta, shard);
    return;
  }
  // Every rank writes its shard; `latest` moves only after all finished (one commit, rank 0),
  // and nobody goes on before it did.
  Comm& comm = groups_->comm();
  const RankLayout& layout = groups_->layout();
  if (dist_optimizer_) {
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
  fit_state_save(shard);  // every rank: the replicas of a stage gather their fits first
  if (dist_optimizer_ || replica0) checkpoint_save_shard(dir, iteration_, shard);
  comm.barrier(fmt::format("saving the checkpoint of iteration {}", iteration_));
  if (comm.rank() == 0) checkpoint_commit(dir, meta);
  comm.barrier(fmt::format("committing the checkpoint of iteration {}", iteration_));
}

}  // namespace infinipipe::runtime
