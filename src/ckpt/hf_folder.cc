#include "ckpt/hf_folder.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ckpt/checkpoint_config.h"
#include "ckpt/checkpoint_state.h"
#include "ckpt/checkpoint_values.h"
#include "ckpt/hf_config.h"
#include "ckpt/hf_tensors.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"

namespace infinipipe {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr const char* kWeights = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

// A small JSON file of the folder: read by the one bounded reader of user files (a regular
// file, no link), parsed with depth limits.
Json read_folder_json(const fs::path& path) {
  return json_parse(
      input_file_read(path.string(), input_kind::kModelFolderJson, InputLinks::refuse),
      path.string(), "the model folder is damaged");
}

bool regular_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(fs::symlink_status(p, ec));
}

// tensor -> file of model.safetensors.index.json; every file a plain name in the folder.
std::map<std::string, std::string> read_index(const fs::path& dir) {
  const std::string path = (dir / kIndex).string();
  const Json index = read_folder_json(dir / kIndex);
  const Json& map = json_field(index, "weight_map", path);
  if (!map.is_object()) fail_config("{}: weight_map is not an object", path);
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : map.items()) {
    const std::string& f = json_string(file, fmt::format("{}: weight_map[{}]", path, name));
    if (!checkpoint_plain_file_name(f) || !f.ends_with(".safetensors")) {
      fail_config(
          "{}: tensor {} is in '{}', which is not a .safetensors file inside the folder; an "
          "index may only name files next to it",
          path, name, f);
    }
    if (!regular_file(dir / f)) {
      fail_config(
          "{}: tensor {} is in {}, which is missing (or not a regular file); copy every "
          "shard the index names into the folder",
          path, name, f);
    }
    out[name] = f;
  }
  if (out.empty()) fail_config("{}: weight_map names no tensor", path);
  return out;
}

}  // namespace

bool hf_folder_is(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  return fs::exists(fs::symlink_status(d / "config.json", ec)) &&
         (fs::exists(fs::symlink_status(d / kWeights, ec)) ||
          fs::exists(fs::symlink_status(d / kIndex, ec)));
}

HfModelReader::HfModelReader(const std::string& dir) : path_(dir) {
  const fs::path d(dir);
  if (!hf_folder_is(dir)) {
    fail_config(
        "{} is not a Hugging Face model folder: it needs config.json and model.safetensors (or "
        "model.safetensors.index.json with its shards); pytorch_model.bin is not read, save with "
        "safe_serialization=True",
        dir);
  }
  config_ = read_folder_json(d / "config.json");
  model_ = hf_config_to_model(config_, (d / "config.json").string());
  // transformers prefers the single file when both exist.
  if (fs::exists(fs::symlink_status(d / kWeights))) {
    if (!regular_file(d / kWeights))
      fail_config("{} is not a regular file (a symbolic link?)", (d / kWeights).string());
    for (const auto& t : open_file(kWeights).tensors()) weight_map_[t.name] = kWeights;
  } else {
    weight_map_ = read_index(d);
  }
}

HfModelReader::~HfModelReader() = default;

std::vector<std::string> HfModelReader::param_names() const {
  std::vector<std::string> names;
  for (const auto& [name, file] : weight_map_) names.push_back(name);
  return names;
}

SafetensorsReader& HfModelReader::open_file(const std::string& file) {
  auto it = open_.find(file);
  if (it != open_.end()) return *it->second;
  auto reader = std::make_unique<SafetensorsReader>((fs::path(path_) / file).string());
  return *open_.emplace(file, std::move(reader)).first->second;
}

const SafetensorsInfo& HfModelReader::info(const std::string& name) {
  const auto it = weight_map_.find(name);
  if (it == weight_map_.end()) fail("{}: has no tensor {}", path_, name);
  const SafetensorsInfo* t = open_file(it->second).find(name);
  if (t == nullptr) {
    fail_config("{}/{}: has no tensor {}, which its index places there", path_, it->second, name);
  }
  return *t;
}

namespace {

// transformers before 4.31 saved RoPE's inverse frequencies as a buffer; they follow from
// rope_theta, so they are recomputed, not unexpected.
bool rope_buffer(const std::string& name) {
  return name.starts_with("model.layers.") && name.ends_with(".self_attn.rotary_emb.inv_freq");
}

}  // namespace

std::vector<std::string> HfModelReader::unexpected_tensors() {
  const std::map<std::string, std::vector<int64_t>> known = hf_model_tensors(model_);
  std::vector<std::string> out;
  std::set<std::string> files;
  for (const auto& [name, file] : weight_map_) {
    files.insert(file);
    if (!known.count(name) && !rope_buffer(name)) out.push_back(name);
  }
  // A shard may hold tensors its index does not list: they would be dropped as silently.
  if (files.size() > 1 || (files.size() == 1 && *files.begin() != kWeights)) {
    for (const std::string& file : files) {
      for (const auto& t : open_file(file).tensors()) {
        const auto it = weight_map_.find(t.name);
        if (it == weight_map_.end() || it->second != file)
          out.push_back(
              fmt::format("{} (in {}, which the index does not place there)", t.name, file));
      }
    }
  }
  return out;
}

void HfModelReader::refuse_unexpected_tensors() {
  const std::vector<std::string> extra = unexpected_tensors();
  if (extra.empty()) return;
  constexpr size_t kShown = 10;
  const std::vector<std::string> shown(extra.begin(),
                                       extra.begin() + std::min(extra.size(), kShown));
  fail_config(
      "{}: the weights hold {} tensor{} its config.json ({} layers{}) does not describe: {}{}; "
      "fix config.json to describe the model, or pass --ignore-unexpected-keys to start "
      "without them",
      path_, extra.size(), extra.size() == 1 ? "" : "s", model_.num_layers,
      model_.tie_embeddings ? ", tied embeddings" : "", fmt::join(shown, ", "),
      extra.size() > kShown ? fmt::format(" and {} more", extra.size() - kShown) : "");
}

void HfModelReader::check_model(const ModelConfig& current) const {
  checkpoint_check_model(model_, current, path_);
}

void HfModelReader::load_params(std::span<const CheckpointTarget> targets) {
  for (const CheckpointTarget& t : targets) {
    if (!weight_map_.count(t.name)) {
      fail_config("{}: has no tensor {}, which the model of its config.json needs", path_, t.name);
    }
    const SafetensorsInfo& info = this->info(t.name);
    if (info.shape != t.shape) {
      fail_config("{}: tensor {} has shape [{}], its config.json makes it [{}]", path_, t.name,
                  fmt::join(info.shape, ", "), fmt::join(t.shape, ", "));
    }
    SafetensorsReader& r = open_file(weight_map_.at(t.name));
    r.read_as_f32(t.name, t.data);  // Error naming the dtype when it is not F32, BF16 or F16
    checkpoint_check_loaded(r.path(), t.name, t.data);
  }
}

}  // namespace infinipipe
