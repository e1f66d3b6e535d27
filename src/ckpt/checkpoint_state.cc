#include "ckpt/checkpoint_state.h"

#include <fmt/format.h>

#include "ckpt/checkpoint_layout.h"
#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe {

using Json = nlohmann::json;

CheckpointState checkpoint_state_from_json(const Json& state, const std::string& path) {
  const auto field = [&](const char* key) -> const Json& { return json_field(state, key, path); };
  const auto where = [&](const std::string& key) { return fmt::format("{}: {}", path, key); };
  if (!state.is_object() || !state.contains("format") ||
      state["format"] != "infinipipe-checkpoint" || !state.contains("version") ||
      state["version"] != kCkptFormatVersion) {
    fail("{}: not an infinipipe checkpoint of format version {}", path, kCkptFormatVersion);
  }
  CheckpointState s;
  // 2^53 iterations or samples is beyond any run and leaves room to count on.
  s.iteration = json_int(field("iteration"), where("iteration"), 0, int64_t{1} << 53);
  s.consumed_samples =
      json_int(field("consumed_samples"), where("consumed_samples"), 0, int64_t{1} << 53);
  s.num_ranks = json_int(field("num_ranks"), where("num_ranks"), 1, 1 << 20);
  s.optimizer = json_string(field("optimizer"), where("optimizer"));
  s.rng = field("rng");
  s.config = field("config");
  s.rank_states = field("rank_states");
  if (!s.rank_states.is_array() || int64_t(s.rank_states.size()) != s.num_ranks) {
    fail("{}: rank_states does not hold one entry per writer", path);
  }
  const Json& files = field("files");
  if (!files.is_object()) fail("{}: files must be an object of file entries", path);
  for (const auto& [file, entry] : files.items()) {
    if (file.empty() || file.find('/') != std::string::npos || file.starts_with(".")) {
      fail("{}: lists a file named '{}' outside the checkpoint directory", path, file);
    }
    const std::string at = where("files." + file);
    s.files[file] = {json_string(json_field(entry, "crc32c", at), at + ".crc32c"),
                     json_int(json_field(entry, "bytes", at), at + ".bytes", 0)};
  }
  return s;
}

std::map<std::string, std::string> checkpoint_index_from_json(
    const Json& index, const std::string& path,
    const std::map<std::string, std::pair<std::string, int64_t>>& files) {
  const Json& weights = json_field(index, "weight_map", path);
  if (!weights.is_object()) fail("{}: weight_map must be an object of tensor -> file", path);
  std::map<std::string, std::string> map;
  for (const auto& [name, f] : weights.items()) {
    const std::string& file = json_string(f, fmt::format("{}: weight_map.{}", path, name));
    if (!files.count(file)) {
      fail("{}: tensor {} is in {}, which state.json does not list", path, name, file);
    }
    map[name] = file;
  }
  return map;
}

}  // namespace infinipipe
