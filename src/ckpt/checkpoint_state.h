// A committed checkpoint's small files read back — state.json and the two safetensors indexes —
// and the one rule that decides whether an iter_ folder is a complete checkpoint, shared by
// --load, `checkpoint list` and `checkpoint verify`, so a checkpoint that --load refuses is never
// listed as complete. The parsers are pure functions of the JSON (every field checked in one
// place, and fuzzed); checksums and values are checked when the data is read (CheckpointReader).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
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
  std::map<std::string, std::string> model_map, optim_map;       // tensor -> file (state_check)
};

// A name a checkpoint may list: one plain file name inside its folder (no '/', not hidden, no
// "." or "..", no control characters).
bool checkpoint_plain_file_name(std::string_view name);

// Error naming `path` and the field when state.json is not of this format or is damaged.
CheckpointState checkpoint_state_from_json(const nlohmann::json& state, const std::string& path);
// tensor -> file of a *.safetensors.index.json; every file must be one `files` lists.
std::map<std::string, std::string> checkpoint_index_from_json(
    const nlohmann::json& index, const std::string& path,
    const std::map<std::string, std::pair<std::string, int64_t>>& files);

// DIR/iter_N, read and checked: the folder and every file it lists are real (no symbolic links)
// regular files with plain names and their recorded sizes; state.json has the format, version,
// iteration and fields a load needs; every tensor of the indexes is in a listed file; and the
// optimizer entries match the optimizer kind and parameters exactly. Error saying what is wrong.
CheckpointState checkpoint_state_check(const std::string& dir, int64_t iteration);

}  // namespace infinipipe
