#include "cli/train_config.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_config.h"
#include "ckpt/hf_folder.h"
#include "core/error.h"

namespace infinipipe::cli {
namespace {

// The Hugging Face folder the run starts from (--load, else --pretrained-checkpoint), if any.
std::string hf_start_folder(const TrainingConfig& tc) {
  for (const std::string& dir : {tc.load, tc.pretrained_checkpoint}) {
    if (!dir.empty() && !checkpoint_find_latest(dir) && hf_folder_is(dir)) return dir;
  }
  return "";
}

}  // namespace

Config train_defaults(const options::ConfigOptions& options, std::string& folder) {
  const Config user = options::resolve_config(options, Config{}, false);
  folder = hf_start_folder(user.training);
  Config base;
  if (folder.empty()) return base;
  const ModelConfig defaults = base.model;
  HfModelReader reader(folder);
  // Every rank reads the folder here first: tensors the model does not have are refused
  // before anything is built (the loader reads only the tensors it needs).
  if (!user.training.ignore_unexpected_keys) reader.refuse_unexpected_tensors();
  base.model = reader.model();
  base.model.seq_length = std::min(defaults.seq_length, base.model.max_position_embeddings);
  return base;
}

Config resolve_train_config(const options::ConfigOptions& options) {
  std::string folder;
  const Config base = train_defaults(options, folder);
  if (folder.empty()) return options::resolve_config(options);
  const Config cfg = options::resolve_config(options, base);
  const std::vector<std::string> diff = checkpoint_model_diff(base.model, cfg.model);
  if (!diff.empty()) {
    fail_config(
        "{} is a Hugging Face model whose config.json defines the model, and the model flags "
        "contradict it: {}; drop those flags (the folder sets them) or load another folder",
        folder, fmt::join(diff, "; "));
  }
  return cfg;
}

Config resolve_train_config_args(const std::vector<std::string>& args) {
  return resolve_train_config(*options::parse_config_args(args).options);
}

}  // namespace infinipipe::cli
