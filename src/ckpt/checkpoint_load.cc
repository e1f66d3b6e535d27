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
#include "ckpt/checkpoint_values.h"
#include "ckpt/hf_config.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/input_file.h"

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

namespace {

// Why DIR/iter_N is not complete, empty when it is (checkpoint_state_check decides).
std::string incomplete_reason(const std::string& dir, int64_t iteration) {
  try {
    checkpoint_state_check(dir, iteration);
  } catch (const std::exception& e) {
    return e.what();  // unreadable or damaged state: not a checkpoint to resume from
  }
  return {};
}

}  // namespace

bool checkpoint_is_complete(const std::string& dir, int64_t iteration) {
  return incomplete_reason(dir, iteration).empty();
}

std::optional<int64_t> checkpoint_find_latest(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  const fs::path latest = fs::path(dir) / kCkptLatest;
  if (fs::is_regular_file(fs::symlink_status(latest, ec))) {  // a link is ignored, not followed
    std::optional<int64_t> it;
    try {
      it = parse_iteration(
          input_file_read(latest.string(), input_kind::kCheckpointWholeFile, InputLinks::refuse));
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
      std::string problem = incomplete_reason(dir, *it);
      out.push_back({*it, problem.empty(), false, std::move(problem)});
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
          "with a state.json, and it is not a Hugging Face model folder with config.json and "
          "model.safetensors); point --load at a directory written by --save or a Hugging Face "
          "Llama folder, or drop --load",
          dir);
    }
    iteration = *found;
  }
  CheckpointState checked;
  try {
    checked = checkpoint_state_check(dir, iteration);
  } catch (const std::exception& e) {
    fail(
        "{} is not a complete checkpoint: {}; it was interrupted while saving or is damaged, "
        "and is never loaded (--load takes the newest complete checkpoint)",
        checkpoint_iter_dir(dir, iteration), e.what());
  }
  path_ = checkpoint_iter_dir(dir, iteration);
  // checkpoint_state_check has checked every field read here.
  iteration_ = checked.iteration;
  consumed_samples_ = checked.consumed_samples;
  num_ranks_ = checked.num_ranks;
  optimizer_kind_ = std::move(checked.optimizer);
  rng_ = std::move(checked.rng);
  config_ = std::move(checked.config);
  rank_states_ = std::move(checked.rank_states);
  files_ = std::move(checked.files);
  model_map_ = std::move(checked.model_map);
  optim_map_ = std::move(checked.optim_map);
  const std::string config_path = (fs::path(path_) / kCkptConfig).string();
  verify_file(kCkptConfig);
  model_ = hf_config_to_model(checkpoint_read_json(config_path), config_path);
  verify_file(kCkptModelIndex);
  verify_file(kCkptOptimIndex);
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

std::vector<float> CheckpointReader::read_param(const std::string& name,
                                                std::vector<int64_t>& shape) {
  auto it = model_map_.find(name);
  if (it == model_map_.end()) fail("{}: has no parameter {}", path_, name);
  SafetensorsReader& r = open_file(it->second);
  shape = r.info(name).shape;
  std::vector<float> values = r.read_f32(name);
  checkpoint_check_loaded(r.path(), name, values);
  return values;
}

std::vector<int64_t> CheckpointReader::param_shape(const std::string& name) {
  auto it = model_map_.find(name);
  if (it == model_map_.end()) fail("{}: has no parameter {}", path_, name);
  return open_file(it->second).info(name).shape;
}

std::string CheckpointReader::read_file(const std::string& file) {
  verify_file(file);  // listed, and the bytes are the ones saved
  return input_file_read((fs::path(path_) / file).string(), input_kind::kCheckpointWholeFile,
                         InputLinks::refuse);
}

int64_t CheckpointReader::verify_all() {
  int64_t bytes = 0;
  for (const auto& [file, entry] : files_) {
    if (file.size() > 12 && file.ends_with(".safetensors")) {
      verify_values(open_file(file), file);  // checksum, the header's own checks, the values
    } else {
      verify_file(file);
    }
    bytes += entry.second;
  }
  return bytes;
}

// Every tensor of `file` is one the indexes place there (no extra, none missing) and holds
// values a load accepts.
void CheckpointReader::verify_values(const SafetensorsReader& r, const std::string& file) const {
  size_t indexed = 0;
  for (const auto* map : {&model_map_, &optim_map_}) {
    for (const auto& [name, f] : *map) {
      if (f != file) continue;
      ++indexed;
      if (r.find(name) == nullptr)
        fail("{}/{}: has no tensor {}, its index says it has", path_, file, name);
    }
  }
  if (indexed != r.tensors().size()) {
    fail("{}/{}: holds {} tensors, the indexes place {} there; the checkpoint is damaged", path_,
         file, r.tensors().size(), indexed);
  }
  for (const SafetensorsInfo& t : r.tensors()) {
    if (t.dtype == "F32") {
      checkpoint_check_loaded(r.path(), t.name, r.read_f32(t.name),
                              optim_map_.count(t.name) && checkpoint_is_second_moment(t.name));
    } else if (t.dtype == "I64" && t.name.ends_with(".step") && optim_map_.count(t.name)) {
      const std::vector<int64_t> step = r.read_i64(t.name);
      if (step.size() != 1) fail("{}: {} is not a scalar", r.path(), t.name);
      checkpoint_check_loaded_step(r.path(), t.name, step[0]);
    } else {
      fail("{}: tensor {} has dtype {}, which infinipipe never saves", r.path(), t.name, t.dtype);
    }
  }
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
    checkpoint_check_loaded(r.path(), t.name, t.data);
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
  const std::string want = optimizer_name(optimizer.options().kind);
  if (optimizer_kind_ == "none" && iteration_ > 0) {
    // Resuming at iteration N with fresh moments would silently change the run.
    fail_config(
        "{} holds weights only (optimizer none) at iteration {}; resuming needs the optimizer "
        "state: load a checkpoint written by `train --save`",
        path_, iteration_);
  }
  if (optimizer_kind_ == "none") return;  // initial weights: the optimizer starts fresh
  if (optimizer_kind_ != want) {
    fail_config("{} was trained with --optimizer {}, this run uses {}; use the same optimizer",
                path_, optimizer_kind_, want);
  }
  // Saved before the first update: the optimizer starts fresh. Otherwise checkpoint_state_check
  // made sure every saved parameter has its whole state.
  if (optim_map_.empty()) return;
  const bool adamw = optimizer.options().kind == Optimizer::adamw;
  for (const CheckpointOptimSlice& p : slices) {
    auto step_it = optim_map_.find(p.name + ".step");
    if (step_it == optim_map_.end()) fail("{}: optimizer state {}.step is missing", path_, p.name);
    auto read_moment = [&](const std::string& name) {
      auto it = optim_map_.find(name);
      if (it == optim_map_.end()) fail("{}: optimizer state {} is missing", path_, name);
      SafetensorsReader& r = open_file(it->second);
      if (r.info(name).shape != p.shape) {
        fail("{}: optimizer state {} has shape {}, the parameter has {}", path_, name,
             shape_str(r.info(name).shape), shape_str(p.shape));
      }
      std::vector<float> all = r.read_f32(name);
      checkpoint_check_loaded(r.path(), name, all, checkpoint_is_second_moment(name));
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
    checkpoint_check_loaded_step(r.path(), p.name + ".step", step[0]);
    s.step = step[0];
    if (adamw) {
      s.exp_avg = read_moment(p.name + ".exp_avg");
      s.exp_avg_sq = read_moment(p.name + ".exp_avg_sq");
    }
    optimizer.set_state(p.name, p.numel, std::move(s));
  }
}

}  // namespace infinipipe
