// The JSON files of a committed checkpoint read back: state.json and the two safetensors
// indexes. Pure functions of the parsed JSON, so every field is checked in one place.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace infinipipe {

struct CheckpointState {
  int64_t iteration = 0;
  int64_t consumed_samples = 0;
  int64_t num_ranks = 1;
  std::string optimizer;  // "adamw", "sgd" or "none"
  nlohmann::json rng, config, rank_states;
  std::map<std::string, std::pair<std::string, int64_t>> files;  // file -> (crc32c hex, bytes)
};

// Error naming `path` and the field when state.json is not of this format or is damaged.
CheckpointState checkpoint_state_from_json(const nlohmann::json& state, const std::string& path);
// tensor -> file of a *.safetensors.index.json; every file must be one `files` lists.
std::map<std::string, std::string> checkpoint_index_from_json(
    const nlohmann::json& index, const std::string& path,
    const std::map<std::string, std::pair<std::string, int64_t>>& files);

}  // namespace infinipipe
