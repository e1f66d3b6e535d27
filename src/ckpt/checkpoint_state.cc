#include "ckpt/checkpoint_state.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_fs.h"
#include "ckpt/checkpoint_layout.h"
#include "ckpt/checkpoint_values.h"
#include "core/error.h"

namespace infinipipe {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

// lstat: a symbolic link (or a FIFO, which would block the read) is refused, not followed.
int64_t regular_file_size(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) fail("{} is missing ({})", path, std::strerror(errno));
  if (S_ISLNK(st.st_mode)) {
    fail("{} is a symbolic link; checkpoint files are never read through one", path);
  }
  if (!S_ISREG(st.st_mode)) fail("{} is not a regular file", path);
  return static_cast<int64_t>(st.st_size);
}

void check_state_fields(const Json& state, const std::string& path, int64_t iteration) {
  if (!state.is_object() || state.value("format", "") != "infinipipe-checkpoint" ||
      state.value("version", 0) != kCkptFormatVersion) {
    fail("{}: not an infinipipe checkpoint of format version {}", path, kCkptFormatVersion);
  }
  if (state.at("iteration").get<int64_t>() != iteration) {
    fail("{}: records iteration {}, its folder says {}", path, state.at("iteration").dump(),
         iteration);
  }
  state.at("consumed_samples").get<int64_t>();
  const int64_t num_ranks = state.at("num_ranks").get<int64_t>();
  if (num_ranks < 1) fail("{}: num_ranks {} is not positive", path, num_ranks);
  state.at("optimizer").get<std::string>();
  state.at("rng");
  state.at("config");
  const Json& ranks = state.at("rank_states");
  if (!ranks.is_array() || static_cast<int64_t>(ranks.size()) != num_ranks) {
    fail("{}: rank_states does not hold one entry per writer", path);
  }
  if (!state.at("files").is_object()) fail("{}: 'files' is not an object", path);
}

void read_files(const Json& state, const fs::path& iter_dir, const std::string& path,
                CheckpointState& out) {
  for (const auto& [file, entry] : state.at("files").items()) {
    if (!checkpoint_plain_file_name(file)) {
      fail("{}: lists a file named '{}' outside the checkpoint directory", path, file);
    }
    const std::string crc = entry.at("crc32c").get<std::string>();
    const int64_t bytes = entry.at("bytes").get<int64_t>();
    const int64_t size = regular_file_size((iter_dir / file).string());
    if (size != bytes) {
      fail("{} has {} bytes, state.json recorded {}", (iter_dir / file).string(), size, bytes);
    }
    out.files[file] = {crc, bytes};
  }
  for (const char* needed : {kCkptConfig, kCkptModelIndex, kCkptOptimIndex}) {
    if (!out.files.count(needed)) fail("{}: does not list {}", path, needed);
  }
}

void read_index(const fs::path& iter_dir, const char* file, const CheckpointState& got,
                std::map<std::string, std::string>& map) {
  const std::string path = (iter_dir / file).string();
  const Json index = checkpoint_read_json(path);
  try {
    for (const auto& [name, f] : index.at("weight_map").items()) {
      map[name] = f.get<std::string>();
      if (!got.files.count(map[name])) {
        fail("{}: tensor {} is in {}, which state.json does not list", path, name, map[name]);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    fail("{}: damaged index ({})", path, e.what());
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

CheckpointState checkpoint_state_check(const std::string& dir, int64_t iteration) {
  const fs::path iter_dir = checkpoint_iter_dir(dir, iteration);
  fs_require_real_dir(iter_dir.string());
  const std::string path = (iter_dir / kCkptState).string();
  regular_file_size(path);
  CheckpointState out;
  out.state = checkpoint_read_json(path);
  try {
    check_state_fields(out.state, path, iteration);
    read_files(out.state, iter_dir, path, out);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: damaged ({})", path, e.what());
  }
  read_index(iter_dir, kCkptModelIndex, out, out.model_map);
  read_index(iter_dir, kCkptOptimIndex, out, out.optim_map);
  checkpoint_check_optim_index(path, out.state.at("optimizer").get<std::string>(), iteration,
                               out.model_map, out.optim_map);
  return out;
}

}  // namespace infinipipe
