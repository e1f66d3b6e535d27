// Loading: find the newest complete checkpoint, verify checksums, read tensors by name.
#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_checksum.h"
#include "ckpt/checkpoint_config.h"
#include "ckpt/checkpoint_fs.h"
#include "ckpt/checkpoint_layout.h"
#include "ckpt/checkpoint_state.h"
#include "ckpt/safetensors.h"
#include "core/error.h"

namespace infinipipe {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

std::optional<int64_t> parse_iteration(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string shape_str(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

}  // namespace

bool checkpoint_is_complete(const std::string& dir, int64_t iteration) {
  const fs::path iter_dir = checkpoint_iter_dir(dir, iteration);
  std::error_code ec;
  if (!fs::is_regular_file(iter_dir / kCkptState, ec)) return false;
  try {
    const Json state = checkpoint_read_json((iter_dir / kCkptState).string());
    if (state.value("iteration", int64_t(-1)) != iteration) return false;
    for (const auto& [file, entry] : state.at("files").items()) {
      const auto size = fs::file_size(iter_dir / file, ec);
      if (ec || int64_t(size) != entry.at("bytes").get<int64_t>()) return false;
    }
  } catch (const std::exception&) {
    return false;  // unreadable or damaged state: not a checkpoint to resume from
  }
  return true;
}

std::optional<int64_t> checkpoint_find_latest(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  const fs::path latest = fs::path(dir) / kCkptLatest;
  if (fs::is_regular_file(latest, ec)) {
    std::optional<int64_t> it;
    try {
      it = parse_iteration(fs_read_text(latest.string()));
    } catch (const Error&) {
    }
    if (it && checkpoint_is_complete(dir, *it)) return it;
  }
  // `latest` is missing, unreadable or names a directory that is gone or incomplete: take the
  // newest complete iter_ directory instead.
  std::optional<int64_t> best;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("iter_", 0) != 0 || !entry.is_directory(ec)) continue;
    const std::optional<int64_t> it = parse_iteration(name.substr(5));
    if (it && (!best || *it > *best) && checkpoint_is_complete(dir, *it)) best = it;
  }
  return best;
}

std::vector<CheckpointEntry> checkpoint_list(const std::string& dir) {
  std::vector<CheckpointEntry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("iter_", 0) != 0 || !entry.is_directory(ec)) continue;
    if (const std::optional<int64_t> it = parse_iteration(name.substr(5))) {
      out.push_back({*it, checkpoint_is_complete(dir, *it), false});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.iteration < b.iteration; });
  if (const std::optional<int64_t> latest = checkpoint_find_latest(dir)) {
    for (CheckpointEntry& e : out) e.latest = e.iteration == *latest;
  }
  return out;
}

CheckpointReader::CheckpointReader(const std::string& dir, int64_t iteration) {
  if (iteration < 0) {
    const std::optional<int64_t> found = checkpoint_find_latest(dir);
    if (!found) {
      fail_config(
          "--load {}: no complete checkpoint there (no `latest`, and no iter_NNNNNNN directory "
          "with a state.json); point --load at a directory written by --save, or drop --load",
          dir);
    }
    iteration = *found;
  } else if (!checkpoint_is_complete(dir, iteration)) {
    fail(
        "{} is not a complete checkpoint (state.json or a file it lists is missing); it was "
        "probably interrupted while saving",
        checkpoint_iter_dir(dir, iteration));
  }
  path_ = checkpoint_iter_dir(dir, iteration);
  const std::string state_path = (fs::path(path_) / kCkptState).string();
  CheckpointState state = checkpoint_state_from_json(checkpoint_read_json(state_path), state_path);
  iteration_ = state.iteration;
  consumed_samples_ = state.consumed_samples;
  num_ranks_ = state.num_ranks;
  optimizer_kind_ = std::move(state.optimizer);
  rng_ = std::move(state.rng);
  config_ = std::move(state.config);
  rank_states_ = std::move(state.rank_states);
  files_ = std::move(state.files);
  auto read_verified = [&](const char* file) {
    verify_file(file);
    return checkpoint_read_json((fs::path(path_) / file).string());
  };
  const std::string config_path = (fs::path(path_) / kCkptConfig).string();
  model_ = checkpoint_model_from_hf(read_verified(kCkptConfig), config_path);
  auto read_map = [&](const char* file, std::map<std::string, std::string>& map) {
    map = checkpoint_index_from_json(read_verified(file), path_ + "/" + file, files_);
  };
  read_map(kCkptModelIndex, model_map_);
  read_map(kCkptOptimIndex, optim_map_);
}

CheckpointReader::~CheckpointReader() = default;

const nlohmann::json& CheckpointReader::rank_state(int64_t rank) const {
  if (rank < 0 || rank >= static_cast<int64_t>(rank_states_.size())) {
    fail("{}: has no state of rank {} (it was written by {} ranks)", path_, rank, num_ranks_);
  }
  return rank_states_[static_cast<size_t>(rank)];
}

std::vector<std::string> CheckpointReader::param_names() const {
  std::vector<std::string> names;
  for (const auto& [name, file] : model_map_) names.push_back(name);
  return names;
}

int64_t CheckpointReader::verify_all() {
  int64_t bytes = 0;
  for (const auto& [file, entry] : files_) {
    if (file.size() > 12 && file.ends_with(".safetensors")) {
      open_file(file);  // checksum, then the header's own checks
    } else {
      verify_file(file);
    }
    bytes += entry.second;
  }
  return bytes;
}

void CheckpointReader::check_model(const ModelConfig& current) const {
  checkpoint_check_model(model_, current, path_);
}

void CheckpointReader::verify_file(const std::string& file) {
  auto it = files_.find(file);
  if (it == files_.end()) fail("{}: state.json does not list {}", path_, file);
  const std::string path = (fs::path(path_) / file).string();
  const FileChecksum c = checksum_file(path);
  if (checksum_hex(c.crc32c) != it->second.first || c.bytes != it->second.second) {
    fail(
        "{}: checksum mismatch (crc32c {} and {} bytes, state.json recorded {} and {}); the file "
        "is damaged: move {} away and --load resumes from the previous complete checkpoint",
        path, checksum_hex(c.crc32c), c.bytes, it->second.first, it->second.second, path_);
  }
}

SafetensorsReader& CheckpointReader::open_file(const std::string& file) {
  auto it = open_.find(file);
  if (it != open_.end()) return *it->second;
  verify_file(file);
  auto reader = std::make_unique<SafetensorsReader>((fs::path(path_) / file).string());
  return *open_.emplace(file, std::move(reader)).first->second;
}

void CheckpointReader::load_params(std::span<const CheckpointTarget> targets) {
  for (const CheckpointTarget& t : targets) {
    auto it = model_map_.find(t.name);
    if (it == model_map_.end()) {
      fail("{}: has no parameter {}; the checkpoint does not match this model", path_, t.name);
    }
    SafetensorsReader& r = open_file(it->second);
    const SafetensorsInfo& info = r.info(t.name);
    if (info.shape != t.shape) {
      fail("{}: parameter {} has shape {} in the checkpoint, this run expects {}", path_, t.name,
           shape_str(info.shape), shape_str(t.shape));
    }
    r.read_f32(t.name, t.data);
  }
}

void CheckpointReader::load_optimizer(std::span<const CheckpointTarget> params,
                                      ParamOptimizer& optimizer) {
  std::vector<CheckpointOptimSlice> whole;
  for (const CheckpointTarget& p : params)
    whole.push_back({p.name, p.shape, 0, static_cast<int64_t>(p.data.size())});
  load_optimizer(whole, optimizer);
}

void CheckpointReader::load_optimizer(std::span<const CheckpointOptimSlice> slices,
                                      ParamOptimizer& optimizer) {
  if (optimizer_kind_ == "none") return;  // weights-only checkpoint: the optimizer starts fresh
  const std::string want = optimizer_name(optimizer.options().kind);
  if (optimizer_kind_ != want) {
    fail_config("{} was trained with --optimizer {}, this run uses {}; use the same optimizer",
                path_, optimizer_kind_, want);
  }
  const bool adamw = optimizer.options().kind == Optimizer::adamw;
  for (const CheckpointOptimSlice& p : slices) {
    auto step_it = optim_map_.find(p.name + ".step");
    if (step_it == optim_map_.end()) continue;  // never updated before the save
    auto read_moment = [&](const std::string& name) {
      auto it = optim_map_.find(name);
      if (it == optim_map_.end()) fail("{}: optimizer state {} is missing", path_, name);
      SafetensorsReader& r = open_file(it->second);
      if (r.info(name).shape != p.shape) {
        fail("{}: optimizer state {} has shape {}, the parameter has {}", path_, name,
             shape_str(r.info(name).shape), shape_str(p.shape));
      }
      std::vector<float> all = r.read_f32(name);
      if (p.offset < 0 || p.numel < 0 || p.offset + p.numel > static_cast<int64_t>(all.size())) {
        fail("internal: elements [{}, {}) of {} asked, it has {}", p.offset, p.offset + p.numel,
             name, all.size());
      }
      if (p.offset == 0 && p.numel == static_cast<int64_t>(all.size())) return all;
      return std::vector<float>(all.begin() + p.offset, all.begin() + p.offset + p.numel);
    };
    OptimState s;
    SafetensorsReader& r = open_file(step_it->second);
    const std::vector<int64_t> step = r.read_i64(p.name + ".step");
    if (step.size() != 1) fail("{}: {}.step is not a scalar", path_, p.name);
    s.step = step[0];
    if (adamw) {
      s.exp_avg = read_moment(p.name + ".exp_avg");
      s.exp_avg_sq = read_moment(p.name + ".exp_avg_sq");
    }
    optimizer.set_state(p.name, p.numel, std::move(s));
  }
}

}  // namespace infinipipe
