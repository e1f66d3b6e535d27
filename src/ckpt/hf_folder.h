// A Hugging Face Llama model folder opened for loading: config.json and the weights, either one
// model.safetensors or shards named by model.safetensors.index.json (transformers' order of
// preference). The folder is treated as hostile: the index may only name plain files inside the
// folder, no file is read through a symbolic link, every tensor's shape and dtype is checked
// against the model its config describes, and every value must be finite.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "core/config.h"

namespace infinipipe {

class SafetensorsReader;
struct SafetensorsInfo;

// True when DIR holds config.json and model.safetensors or model.safetensors.index.json (an
// infinipipe iter_ folder is one too).
bool hf_folder_is(const std::string& dir);

class HfModelReader {
 public:
  // ConfigError saying what is missing or unsupported.
  explicit HfModelReader(const std::string& dir);
  ~HfModelReader();

  const std::string& path() const { return path_; }
  const ModelConfig& model() const { return model_; }
  const nlohmann::json& config_json() const { return config_; }
  std::vector<std::string> param_names() const;  // sorted
  const SafetensorsInfo& info(const std::string& name);

  // The tensors of the weights that a Llama of config.json does not have (sorted), with where
  // each is: an extra layer, an unknown name, a shard's tensor its index does not list.
  std::vector<std::string> unexpected_tensors();
  // ConfigError naming them (at most 10) unless there are none; the fix is a matching
  // config.json, or --ignore-unexpected-keys.
  void refuse_unexpected_tensors();

  // ConfigError naming every difference when the folder's model is not `current`.
  void check_model(const ModelConfig& current) const;
  // Fills each target from F32, BF16 or F16 data. Error for a missing name, another shape or
  // dtype, or a NaN or infinite value.
  void load_params(std::span<const CheckpointTarget> targets);

 private:
  SafetensorsReader& open_file(const std::string& file);
  std::string path_;
  ModelConfig model_;
  nlohmann::json config_;
  std::map<std::string, std::string> weight_map_;  // tensor -> file
  std::map<std::string, std::unique_ptr<SafetensorsReader>> open_;
};

}  // namespace infinipipe
