// Checkpoints: one logical checkpoint whatever the parallel layout that wrote it.
//
//   DIR/latest                              "7\n", the newest committed iteration
//   DIR/latest_checkpointed_iteration.txt   the same (Megatron's name)
//   DIR/iter_0000007/
//     config.json                           Hugging Face LlamaConfig
//     model.safetensors                     (1 writer)  or  model-00001-of-00004.safetensors ...
//     model.safetensors.index.json          HF's sharded index: weight_map name -> file
//     optimizer.safetensors (or -NNNNN-of-NNNNN), optimizer.safetensors.index.json
//                                           <param>.exp_avg, <param>.exp_avg_sq, <param>.step
//     shard-rank00000.json ...              what each writer wrote (names, checksums)
//     state.json                            iteration, samples, RNG, config, checksums; written
//                                           last: a directory without it is incomplete
//
// Saving is two steps so many ranks can write at once: every rank calls checkpoint_save_shard
// with the tensors it owns (global names), then, after a barrier, one process calls
// checkpoint_commit, which checks the shards, writes the indexes and state.json, and only then
// moves `latest` (atomically). Loading reads any subset of tensors by name from any layout.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "model/optimizer.h"

namespace infinipipe {

class SafetensorsReader;

// A tensor to save, by global (Hugging Face) name; the data is borrowed.
struct CheckpointTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> data;
};

// A tensor to fill on load.
struct CheckpointTarget {
  std::string name;
  std::vector<int64_t> shape;
  std::span<float> data;
};

// Builds save/load views from any parameter list with name, shape, value and numel members (such
// as the model's ParamRef), without this header depending on the model's.
template <typename P>
std::vector<CheckpointTensor> checkpoint_tensors(const std::vector<P>& params) {
  std::vector<CheckpointTensor> out;
  for (const P& p : params) out.push_back({p.name, p.shape, {p.value, size_t(p.numel)}});
  return out;
}
template <typename P>
std::vector<CheckpointTarget> checkpoint_targets(const std::vector<P>& params) {
  std::vector<CheckpointTarget> out;
  for (const P& p : params) out.push_back({p.name, p.shape, {p.value, size_t(p.numel)}});
  return out;
}

// One parameter's whole optimizer state, to save (the data is borrowed).
struct CheckpointOptimState {
  std::string name;
  std::vector<int64_t> shape;
  int64_t step = 0;
  std::span<const float> exp_avg, exp_avg_sq;  // empty for SGD
};

// Elements [offset, offset + numel) of a parameter's saved state, to load (a distributed
// optimizer's part); shape is the whole parameter's.
struct CheckpointOptimSlice {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numel = 0;
};

// What one writer (rank) saves: its parameters and, optionally, their optimizer state. Every
// parameter must be saved by exactly one writer: with data parallelism only one replica (dp rank
// 0) lists it; a writer with no tensors writes only its manifest (rank_state).
struct CheckpointShard {
  int64_t rank = 0;       // 0 <= rank < num_ranks
  int64_t num_ranks = 1;  // writers of this checkpoint
  std::vector<CheckpointTensor> params;
  const ParamOptimizer* optimizer = nullptr;  // null: weights only
  // With a distributed optimizer `optimizer` holds parts of states: the writer lists instead the
  // whole states it saves (of any parameters, not only its `params`); `optimizer` names the kind.
  std::optional<std::vector<CheckpointOptimState>> optimizer_states;
  nlohmann::json rank_state = nlohmann::json::object();  // opaque per-rank state (e.g. its RNG)
  // Small files of the writer's own (name -> bytes; plain names unique across writers), listed
  // with their checksums like the tensors' files and read back with CheckpointReader::read_file.
  std::map<std::string, std::string> small_files;
  // The model file's place among the writers that hold model tensors, for its Hugging Face name
  // model-000(part+1)-of-000(parts); part < 0 means rank of num_ranks. A writer without
  // tensors (or optimizer state) writes no model (optimizer) file at all.
  int64_t model_part = -1, model_parts = 0;
};

// The tokenizer a checkpoint records for Hugging Face users: config.json's bos/eos ids,
// generation_config.json, tokenizer_config.json and, for SentencePiece, tokenizer.model (for
// HuggingFaceTokenizer, tokenizer.json).
struct CheckpointTokenizer {
  nlohmann::json tokenizer_config;  // null: no tokenizer recorded (nor bos/eos)
  std::string model_file;           // copied byte for byte as tokenizer.model ("" = none)
  std::string json_file;            // copied byte for byte as tokenizer.json ("" = none)
  int64_t bos = -1, eos = -1;       // -1: the tokenizer has none
  int64_t eod = -1;  // the end of document of the data; written beside eos when it differs
};

// What the committing process records for the whole run.
struct CheckpointMeta {
  int64_t iteration = 0;
  int64_t consumed_samples = 0;
  ModelConfig model;
  nlohmann::json rng = nlohmann::json::object();     // opaque, supplied by the caller
  nlohmann::json config = nlohmann::json::object();  // the resolved run configuration
  CheckpointTokenizer tokenizer;
};

std::string checkpoint_iter_dir(const std::string& dir, int64_t iteration);  // DIR/iter_0000007

// Step 1, every rank: writes this rank's files into DIR/iter_NNNNNNN (created when needed).
void checkpoint_save_shard(const std::string& dir, int64_t iteration, const CheckpointShard& shard);
// Step 2, one process, after every rank returned from step 1: verifies that all shards are
// there and disjoint, writes config.json, the indexes and state.json, then DIR/latest.
void checkpoint_commit(const std::string& dir, const CheckpointMeta& meta);
// Both steps, for a single process.
void checkpoint_save(const std::string& dir, const CheckpointMeta& meta,
                     const CheckpointShard& shard);

// True when DIR/iter_N has a state.json naming files that all exist with their recorded sizes,
// with plain names inside the folder and no symbolic links, and indexes whose optimizer entries
// match the optimizer kind (checkpoint_state.h: the rule --load, list and verify share).
bool checkpoint_is_complete(const std::string& dir, int64_t iteration);
// The iteration to resume from: `latest` when it names a complete checkpoint, otherwise the
// newest complete iter_ directory (a crash can leave `latest` behind); nullopt when none.
std::optional<int64_t> checkpoint_find_latest(const std::string& dir);

// Every iter_ directory under DIR, oldest first, with whether it is complete and is the one
// checkpoint_find_latest picks.
struct CheckpointEntry {
  int64_t iteration = 0;
  bool complete = false;
  bool latest = false;
  std::string problem;  // why it is not complete (empty when it is)
};
std::vector<CheckpointEntry> checkpoint_list(const std::string& dir);

// A committed checkpoint opened for loading. Every file's checksum is verified the first time it
// is read; a mismatch is an Error naming the file.
class CheckpointReader {
 public:
  // iteration < 0 means the newest complete one; ConfigError when DIR holds none.
  explicit CheckpointReader(const std::string& dir, int64_t iteration = -1);
  ~CheckpointReader();

  const std::string& path() const { return path_; }  // DIR/iter_NNNNNNN
  int64_t iteration() const { return iteration_; }
  int64_t consumed_samples() const { return consumed_samples_; }
  int64_t num_ranks() const { return num_ranks_; }  // writers that saved it
  const ModelConfig& model() const { return model_; }
  const nlohmann::json& rng() const { return rng_; }
  const nlohmann::json& config() const { return config_; }
  const nlohmann::json& rank_state(int64_t rank) const;
  const std::string& optimizer_kind() const { return optimizer_kind_; }  // "adamw", "sgd", "none"
  std::vector<std::string> param_names() const;                          // sorted
  // A parameter's saved values (checked) and shape.
  std::vector<float> read_param(const std::string& name, std::vector<int64_t>& shape);
  std::vector<int64_t> param_shape(const std::string& name);
  // Whether state.json lists `file`, and its bytes (checksum verified), for small files such as
  // the tokenizer's.
  bool has_file(const std::string& file) const { return files_.count(file) != 0; }
  std::string read_file(const std::string& file);

  // Verifies every file's checksum, parses every safetensors header, checks that each file holds
  // exactly the tensors the indexes place there and that every value is one a load accepts
  // (finite, second moments >= 0, steps >= 1); returns the bytes read.
  int64_t verify_all();
  // ConfigError naming every differing field when the saved model is not `current`.
  void check_model(const ModelConfig& current) const;
  // Fills each target (any subset, whatever layout wrote the checkpoint). Error when a name is
  // missing, its shape differs or a value is NaN or infinite.
  void load_params(std::span<const CheckpointTarget> targets);
  // Installs the saved optimizer state of the named parameters (shape from each target).
  // A checkpoint saved before the first update has no state: the optimizer starts fresh; any
  // other must hold every parameter's whole state of the same optimizer kind (ConfigError for
  // another kind or weights only), with finite values (Error otherwise).
  void load_optimizer(std::span<const CheckpointTarget> params, ParamOptimizer& optimizer);
  // The same for parts of parameters (a distributed optimizer's share), each installed as the
  // state of its name with its own numel.
  void load_optimizer(std::span<const CheckpointOptimSlice> slices, ParamOptimizer& optimizer);

 private:
  SafetensorsReader& open_file(const std::string& file);  // verifies the checksum once
  void verify_file(const std::string& file);
  void verify_values(const SafetensorsReader& r, const std::string& file) const;

  std::string path_;
  int64_t iteration_ = 0, consumed_samples_ = 0, num_ranks_ = 1;
  ModelConfig model_;
  nlohmann::json rng_, config_, rank_states_;
  std::string optimizer_kind_;
  std::map<std::string, std::pair<std::string, int64_t>> files_;  // file -> (crc32c hex, bytes)
  std::map<std::string, std::string> model_map_, optim_map_;      // tensor -> file
  std::map<std::string, std::unique_ptr<SafetensorsReader>> open_;
};

}  // namespace infinipipe
