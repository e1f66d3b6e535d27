#include "ckpt/hf_export.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_fs.h"
#include "ckpt/checkpoint_layout.h"
#include "ckpt/float_convert.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

// OUT is created when missing; an existing OUT must be a real, empty folder, so an export never
// mixes with or overwrites another model, and never lands elsewhere through a link.
void prepare_out_dir(const std::string& out) {
  struct stat st {};
  if (::lstat(out.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      fail_config(
          "{} is a symbolic link; an export is never written through one: choose the "
          "folder itself or a new path",
          out);
    }
    if (!S_ISDIR(st.st_mode)) fail_config("{} exists and is not a folder; choose a new path", out);
    std::error_code ec;
    if (!fs::is_empty(out, ec) || ec) {
      fail_config("{} is not empty; export into a new or empty folder", out);
    }
  } else if (errno != ENOENT) {
    fail_config("cannot inspect {}: {}", out, std::strerror(errno));
  }
  fs_make_dirs(out);
  fs_require_real_dir(out);
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Consecutive tensors (sorted names) grouped so that no shard exceeds max_bytes, as
// save_pretrained does; a single tensor larger than that gets a shard of its own.
std::vector<std::vector<std::string>> plan_shards(CheckpointReader& reader, int64_t elem_bytes,
                                                  int64_t max_bytes) {
  std::vector<std::vector<std::string>> shards(1);
  int64_t in_shard = 0;
  for (const std::string& name : reader.param_names()) {
    const int64_t bytes = numel_of(reader.param_shape(name)) * elem_bytes;
    if (!shards.back().empty() && in_shard + bytes > max_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(name);
    in_shard += bytes;
  }
  return shards;
}

// Writes one shard's tensors in the export's dtype; returns their bytes.
int64_t write_shard(CheckpointReader& reader, const std::vector<std::string>& names,
                    HfExportDtype dtype, const fs::path& path) {
  SafetensorsWriter writer;
  writer.set_metadata("format", "pt");                // transformers refuses safetensors without it
  std::vector<std::vector<float>> f32(names.size());  // borrowed by the writer until write()
  std::vector<std::vector<uint16_t>> bf16(names.size());
  int64_t bytes = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<int64_t> shape;
    f32[i] = reader.read_param(names[i], shape);
    if (dtype == HfExportDtype::bf16) {
      bf16[i].resize(f32[i].size());
      for (size_t k = 0; k < f32[i].size(); ++k) bf16[i][k] = f32_to_bf16(f32[i][k]);
      std::vector<float>().swap(f32[i]);
      writer.add_bf16(names[i], shape, bf16[i]);
      bytes += int64_t(bf16[i].size()) * 2;
    } else {
      writer.add_f32(names[i], shape, f32[i]);
      bytes += int64_t(f32[i].size()) * 4;
    }
  }
  writer.write(path.string());
  return bytes;
}

void write_json(const fs::path& path, const Json& j) {
  fs_write_atomic(path.string(), j.dump(2) + "\n");
}

// config.json as saved, in the export's dtype; the generation and tokenizer files as saved.
void write_side_files(CheckpointReader& reader, HfExportDtype dtype, const fs::path& out) {
  Json config = json_parse(reader.read_file(kCkptConfig), reader.path() + "/config.json");
  config["torch_dtype"] = dtype == HfExportDtype::bf16 ? "bfloat16" : "float32";
  write_json(out / kCkptConfig, config);
  for (const char* file :
       {kCkptGenerationConfig, kCkptTokenizerConfig, kCkptTokenizerModel, kCkptTokenizerJson}) {
    if (reader.has_file(file)) fs_write_atomic((out / file).string(), reader.read_file(file));
  }
}

}  // namespace

HfExportResult hf_export(const std::string& checkpoint_dir, const std::string& out,
                         const HfExportOptions& options) {
  if (options.max_shard_bytes < 1) fail_config("--max-shard-size must be positive");
  CheckpointReader reader(checkpoint_dir);
  prepare_out_dir(out);
  const fs::path dir(out);
  const int64_t elem = options.dtype == HfExportDtype::bf16 ? 2 : 4;
  const auto shards = plan_shards(reader, elem, options.max_shard_bytes);
  HfExportResult result;
  result.iteration = reader.iteration();
  result.shards = static_cast<int64_t>(shards.size());
  Json weight_map = Json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = shards.size() == 1 ? "model.safetensors"
                                                : fmt::format("model-{:05d}-of-{:05d}.safetensors",
                                                              s + 1, shards.size());
    result.bytes += write_shard(reader, shards[s], options.dtype, dir / file);
    for (const std::string& name : shards[s]) weight_map[name] = file;
    result.tensors += static_cast<int64_t>(shards[s].size());
  }
  if (shards.size() > 1) {
    write_json(dir / kCkptModelIndex,
               {{"metadata", {{"total_size", result.bytes}}}, {"weight_map", weight_map}});
  }
  write_side_files(reader, options.dtype, dir);
  fs_sync_dir(out);
  return result;
}

}  // namespace infinipipe
