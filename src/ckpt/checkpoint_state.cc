#include "ckpt/checkpoint_state.h"

#include <filesystem>

#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_fs.h"
#include "ckpt/checkpoint_layout.h"
#include "ckpt/checkpoint_values.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"

namespace infinipipe {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

// Every listed file is there with its recorded size, and the three small files are listed.
void files_check(const fs::path& iter_dir, const std::string& path, const CheckpointState& s) {
  for (const auto& [file, entry] : s.files) {
    // The one reader's checks: a regular file, not a symbolic link (nor a FIFO that would block).
    const int64_t size = input_file_check((iter_dir / file).string(), input_kind::kCheckpointFile,
                                          InputLinks::refuse);
    if (size != entry.second) {
      fail("{} has {} bytes, state.json recorded {}", (iter_dir / file).string(), size,
           entry.second);
    }
  }
  for (const char* needed : {kCkptConfig, kCkptModelIndex, kCkptOptimIndex}) {
    if (!s.files.count(needed)) fail("{}: does not list {}", path, needed);
  }
}

}  // namespace

bool checkpoint_plain_file_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name.front() == '.') return false;
  for (char c : name) {
    if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20) return false;
  }
  return true;
}

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
    if (!checkpoint_plain_file_name(file)) {
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

CheckpointState checkpoint_state_check(const std::string& dir, int64_t iteration) {
  const fs::path iter_dir = checkpoint_iter_dir(dir, iteration);
  fs_require_real_dir(iter_dir.string());
  const std::string path = (iter_dir / kCkptState).string();
  CheckpointState s = checkpoint_state_from_json(checkpoint_read_json(path), path);
  if (s.iteration != iteration) {
    fail("{}: records iteration {}, its folder says {}", path, s.iteration, iteration);
  }
  files_check(iter_dir, path, s);
  const auto index_read = [&](const char* file) {
    const std::string p = (iter_dir / file).string();
    return checkpoint_index_from_json(checkpoint_read_json(p), p, s.files);
  };
  s.model_map = index_read(kCkptModelIndex);
  s.optim_map = index_read(kCkptOptimIndex);
  checkpoint_check_optim_index(path, s.optimizer, iteration, s.model_map, s.optim_map);
  return s;
}

}  // namespace infinipipe
