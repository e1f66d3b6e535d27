// Saving: every rank writes its shard (checkpoint_save_shard), one process commits.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_checksum.h"
#include "ckpt/checkpoint_config.h"
#include "ckpt/checkpoint_fs.h"
#include "ckpt/checkpoint_layout.h"
#include "ckpt/checkpoint_state.h"
#include "ckpt/checkpoint_values.h"
#include "ckpt/safetensors.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"

namespace infinipipe {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string checkpoint_iter_dir(const std::string& dir, int64_t iteration) {
  return (fs::path(dir) / fmt::format("iter_{:07d}", iteration)).string();
}

std::string checkpoint_shard_file(const char* kind, int64_t rank, int64_t num_ranks) {
  if (num_ranks == 1) return fmt::format("{}.safetensors", kind);
  return fmt::format("{}-{:05d}-of-{:05d}.safetensors", kind, rank + 1, num_ranks);
}

std::string checkpoint_manifest_file(int64_t rank) {
  return fmt::format("shard-rank{:05d}.json", rank);
}

Json checkpoint_read_json(const std::string& path) {
  return json_parse(input_file_read(path, input_kind::kCheckpointJson, InputLinks::refuse), path,
                    "the checkpoint is damaged");
}

namespace {

Json file_entry(const FileChecksum& c) {
  return {{"crc32c", checksum_hex(c.crc32c)}, {"bytes", c.bytes}};
}

// Writes a small JSON file atomically and returns its checksum entry.
Json write_json_entry(const fs::path& path, const Json& j) {
  const std::string text = j.dump(2) + "\n";
  fs_write_atomic(path.string(), text);
  return file_entry({checksum_crc32c(0, text.data(), text.size()), int64_t(text.size())});
}

// Refuses NaN or infinite weights and moments before anything reaches the disk, so a diverged
// run leaves the previous checkpoint as the newest one.
void check_for_save(int64_t iteration, const CheckpointShard& shard,
                    const std::vector<CheckpointOptimState>& states) {
  for (const CheckpointTensor& t : shard.params)
    checkpoint_check_for_save(iteration, t.name, t.data);
  for (const CheckpointOptimState& s : states) {
    checkpoint_check_for_save(iteration, s.name + ".exp_avg", s.exp_avg);
    checkpoint_check_for_save(iteration, s.name + ".exp_avg_sq", s.exp_avg_sq, true);
  }
}

// Creates DIR/iter_N as a real folder and, when an earlier save of this iteration left a
// state.json, drops it first so the folder counts as incomplete until the new commit, instead of
// pairing old checksums with new files.
void prepare_iter_dir(const fs::path& iter_dir) {
  fs_make_dirs(iter_dir.string());
  fs_require_real_dir(iter_dir.string());
  const fs::path state = iter_dir / kCkptState;
  if (::unlink(state.c_str()) == 0) {
    fs_sync_dir(iter_dir.string());
  } else if (errno != ENOENT) {
    fail("cannot remove {}: {}", state.string(), std::strerror(errno));
  }
}

}  // namespace

void checkpoint_save_shard(const std::string& dir, int64_t iteration,
                           const CheckpointShard& shard) {
  if (iteration < 0) fail("checkpoint: iteration {} is negative", iteration);
  if (shard.num_ranks < 1 || shard.rank < 0 || shard.rank >= shard.num_ranks) {
    fail("checkpoint: rank {} is not in [0, {})", shard.rank, shard.num_ranks);
  }
  const fs::path iter_dir = checkpoint_iter_dir(dir, iteration);

  SafetensorsWriter model;
  model.set_metadata("format", "pt");  // transformers refuses safetensors without it
  Json model_names = Json::array();
  for (const CheckpointTensor& t : shard.params) {
    model.add_f32(t.name, t.shape, t.data);
    model_names.push_back(t.name);
  }

  SafetensorsWriter optim;
  optim.set_metadata("format", "pt");
  Json optim_names = Json::array();
  std::string kind = "none";
  std::vector<CheckpointOptimState> states;
  if (shard.optimizer != nullptr) {
    kind = optimizer_name(shard.optimizer->options().kind);
    if (shard.optimizer_states) {
      states = *shard.optimizer_states;
    } else {
      for (const CheckpointTensor& t : shard.params) {
        if (!shard.optimizer->has_state(t.name)) continue;  // never updated: nothing to save
        const OptimState& s = shard.optimizer->state(t.name);
        states.push_back({t.name, t.shape, s.step, s.exp_avg, s.exp_avg_sq});
      }
    }
  }
  const bool adamw =
      shard.optimizer != nullptr && shard.optimizer->options().kind == Optimizer::adamw;
  for (const CheckpointOptimState& s : states) {
    optim.add_i64(s.name + ".step", {}, std::span<const int64_t>(&s.step, 1));
    optim_names.push_back(s.name + ".step");
    if (adamw) {
      optim.add_f32(s.name + ".exp_avg", s.shape, s.exp_avg);
      optim.add_f32(s.name + ".exp_avg_sq", s.shape, s.exp_avg_sq);
      optim_names.push_back(s.name + ".exp_avg");
      optim_names.push_back(s.name + ".exp_avg_sq");
    }
  }

  check_for_save(iteration, shard, states);
  prepare_iter_dir(iter_dir);

  // Only files that hold something are written (a data-parallel replica may hold nothing).
  const bool own_part = shard.model_part >= 0;
  const std::string model_file =
      model.size() == 0 ? ""
                        : checkpoint_shard_file("model", own_part ? shard.model_part : shard.rank,
                                                own_part ? shard.model_parts : shard.num_ranks);
  const std::string optim_file =
      optim.size() == 0 ? "" : checkpoint_shard_file("optimizer", shard.rank, shard.num_ranks);
  Json files = Json::object();
  if (!model_file.empty()) {
    const SafetensorsWritten w = model.write((iter_dir / model_file).string());
    files[model_file] = file_entry({w.crc32c, w.bytes});
  }
  if (!optim_file.empty()) {
    const SafetensorsWritten w = optim.write((iter_dir / optim_file).string());
    files[optim_file] = file_entry({w.crc32c, w.bytes});
  }

  for (const auto& [name, bytes] : shard.small_files) {
    if (!checkpoint_plain_file_name(name) || files.contains(name))
      fail("checkpoint: rank {} saves a small file named '{}', which is not a plain, new name",
           shard.rank, name);
    fs_write_atomic((iter_dir / name).string(), bytes);
    files[name] =
        file_entry({checksum_crc32c(0, bytes.data(), bytes.size()), int64_t(bytes.size())});
  }

  int64_t model_bytes = 0;
  for (const CheckpointTensor& t : shard.params) model_bytes += int64_t(t.data.size()) * 4;
  const Json manifest = {
      {"rank", shard.rank},
      {"num_ranks", shard.num_ranks},
      {"iteration", iteration},
      {"optimizer", kind},
      {"files", files},
      {"model_file", model_file},
      {"optimizer_file", optim_file},
      {"model_tensors", model_names},
      {"model_bytes", model_bytes},
      {"optimizer_tensors", optim_names},
      {"rank_state", shard.rank_state},
  };
  // Written last: its presence says this rank's shard is complete and on disk.
  write_json_entry(iter_dir / checkpoint_manifest_file(shard.rank), manifest);
}

namespace {

// Rank `rank`'s manifest of this iteration; Error if the rank has not finished its shard.
Json manifest_read(const fs::path& iter_dir, int64_t iteration, int64_t rank) {
  const fs::path p = iter_dir / checkpoint_manifest_file(rank);
  if (!fs::exists(p)) {
    fail(
        "checkpoint {}: rank {} has not finished its shard ({} is missing); every rank must "
        "call checkpoint_save_shard before the commit",
        iter_dir.string(), rank, p.filename().string());
  }
  Json m = checkpoint_read_json(p.string());
  if (m.value("iteration", int64_t(-1)) != iteration || !m.contains("files")) {
    fail("{}: manifest of another iteration or damaged", p.string());
  }
  return m;
}

// Every rank's manifest merged: the files (checked on disk), which shard holds each tensor, the
// ranks' states, and the names a committed iteration directory keeps.
struct ShardsMerged {
  int64_t num_ranks = 0;
  Json files = Json::object();
  Json model_map = Json::object(), optim_map = Json::object();
  Json rank_states = Json::array();
  std::set<std::string> keep = {kCkptState};
  std::string kind;  // the optimizer's
  int64_t model_bytes = 0;
};

// Adds rank r's manifest m to `out`; Error if it disagrees with the others.
void manifest_merge(const fs::path& iter_dir, const Json& m, int64_t r, ShardsMerged& out) {
  if (m.value("num_ranks", int64_t(0)) != out.num_ranks) {
    fail(
        "checkpoint {}: rank {} wrote its shard for {} ranks, rank 0 for {}; remove the "
        "directory and save again",
        iter_dir.string(), r, m.value("num_ranks", int64_t(0)), out.num_ranks);
  }
  const std::string k = m.value("optimizer", "none");
  if (r > 0 && k != out.kind)
    fail("checkpoint {}: ranks saved different optimizers ({} and {})", iter_dir.string(), out.kind,
         k);
  out.kind = k;
  for (const auto& [file, entry] : m.at("files").items()) {
    const fs::path p = iter_dir / file;
    if (!checkpoint_plain_file_name(file) || fs::is_symlink(p)) {
      fail(
          "checkpoint {}: rank {} lists '{}', which is not a plain file inside the folder; "
          "remove the folder and save again",
          iter_dir.string(), r, file);
    }
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (ec || int64_t(size) != entry.value("bytes", int64_t(-1))) {
      fail("checkpoint {}: shard file {} of rank {} is missing or has the wrong size",
           iter_dir.string(), file, r);
    }
    if (out.files.contains(file)) {
      fail("checkpoint {}: file {} was written by two ranks; remove the folder and save again",
           iter_dir.string(), file);
    }
    out.files[file] = entry;
    out.keep.insert(file);
  }
  auto add_all = [&](Json& map, const char* list, const char* file_key) {
    for (const Json& name : m.value(list, Json::array())) {
      const std::string n = name.get<std::string>();
      if (map.contains(n)) {
        fail(
            "checkpoint {}: tensor {} was saved by two ranks ({} and {}); each parameter must "
            "belong to exactly one shard",
            iter_dir.string(), n, map[n].get<std::string>(), m.at(file_key).get<std::string>());
      }
      map[n] = m.at(file_key);
    }
  };
  add_all(out.model_map, "model_tensors", "model_file");
  add_all(out.optim_map, "optimizer_tensors", "optimizer_file");
  out.model_bytes += m.value("model_bytes", int64_t(0));
  out.rank_states.push_back(m.value("rank_state", Json::object()));
  out.keep.insert(checkpoint_manifest_file(r));
}

ShardsMerged shards_merge(const fs::path& iter_dir, int64_t iteration) {
  ShardsMerged out;
  const Json first = manifest_read(iter_dir, iteration, 0);
  out.num_ranks = first.value("num_ranks", int64_t(0));
  if (out.num_ranks < 1) fail("{}: bad num_ranks in the rank 0 manifest", iter_dir.string());
  for (int64_t r = 0; r < out.num_ranks; r++) {
    manifest_merge(iter_dir, r == 0 ? first : manifest_read(iter_dir, iteration, r), r, out);
  }
  return out;
}

// The Hugging Face files: config.json (with the tokenizer's ids), generation_config.json and
// the tokenizer's own files, when a tokenizer is recorded.
void hf_files_write(const fs::path& iter_dir, const CheckpointMeta& meta, ShardsMerged& merged) {
  const CheckpointTokenizer& tok = meta.tokenizer;
  Json ids = nullptr;
  if (!tok.tokenizer_config.is_null()) {
    ids = {{"bos_token_id", tok.bos >= 0 ? Json(tok.bos) : Json(nullptr)},
           {"eos_token_id", tok.eos >= 0 ? Json(tok.eos) : Json(nullptr)}};
    // Generation stops at the data's end of document too (SentencePieceTokenizer's <EOD>).
    if (tok.eod >= 0 && tok.eod != tok.eos) {
      ids["eos_token_id"] = tok.eos >= 0 ? Json{tok.eos, tok.eod} : Json(tok.eod);
    }
  }
  auto add = [&](const char* name, const Json& j) {
    merged.files[name] = write_json_entry(iter_dir / name, j);
    merged.keep.insert(name);
  };
  add(kCkptConfig, checkpoint_hf_config(meta.model, ids));
  if (ids.is_null()) return;
  add(kCkptGenerationConfig, checkpoint_hf_generation_config(ids));
  add(kCkptTokenizerConfig, tok.tokenizer_config);
  auto copy = [&](const std::string& from, const char* name) {
    if (from.empty()) return;
    // Non-blocking and bounded: a FIFO given as the tokenizer is an error, not a hang.
    const std::string bytes =
        input_file_read(from, input_kind::kTokenizerModel, InputLinks::refuse);
    fs_write_atomic((iter_dir / name).string(), bytes);
    merged.files[name] =
        file_entry({checksum_crc32c(0, bytes.data(), bytes.size()), int64_t(bytes.size())});
    merged.keep.insert(name);
  };
  copy(tok.model_file, kCkptTokenizerModel);
  copy(tok.json_file, kCkptTokenizerJson);
}

// The Hugging Face files and the model's and optimizer's tensor indexes.
void indexes_write(const fs::path& iter_dir, const CheckpointMeta& meta, ShardsMerged& merged) {
  hf_files_write(iter_dir, meta, merged);
  merged.files[kCkptModelIndex] = write_json_entry(
      iter_dir / kCkptModelIndex,
      {{"metadata", {{"total_size", merged.model_bytes}}}, {"weight_map", merged.model_map}});
  merged.files[kCkptOptimIndex] = write_json_entry(
      iter_dir / kCkptOptimIndex, {{"metadata", Json::object()}, {"weight_map", merged.optim_map}});
  merged.keep.insert({kCkptModelIndex, kCkptOptimIndex});
}

void commit_checked(const std::string& dir, const CheckpointMeta& meta) {
  const fs::path iter_dir = checkpoint_iter_dir(dir, meta.iteration);
  ShardsMerged merged = shards_merge(iter_dir, meta.iteration);
  indexes_write(iter_dir, meta, merged);

  // Files of an earlier, abandoned attempt at this iteration (other layout, temporaries).
  for (const auto& entry : fs::directory_iterator(iter_dir)) {
    if (!merged.keep.count(entry.path().filename().string())) fs::remove_all(entry.path());
  }

  const Json state = {
      {"format", "infinipipe-checkpoint"},
      {"version", kCkptFormatVersion},
      {"iteration", meta.iteration},
      {"consumed_samples", meta.consumed_samples},
      {"num_ranks", merged.num_ranks},
      {"optimizer", merged.kind},
      {"rng", meta.rng},
      {"config", meta.config},
      {"rank_states", merged.rank_states},
      {"files", merged.files},
  };
  write_json_entry(iter_dir / kCkptState, state);  // the checkpoint exists from here on

  const std::string latest = fmt::format("{}\n", meta.iteration);
  fs_write_atomic((fs::path(dir) / kCkptLatest).string(), latest);
  fs_write_atomic((fs::path(dir) / kCkptLatestMegatron).string(), latest);
}

}  // namespace

void checkpoint_commit(const std::string& dir, const CheckpointMeta& meta) {
  // The shards went into a real folder; one swapped for a link since must not take the rest.
  const std::string iter_dir = checkpoint_iter_dir(dir, meta.iteration);
  if (fs::is_symlink(iter_dir)) fs_require_real_dir(iter_dir);
  try {
    commit_checked(dir, meta);
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint {}: a shard manifest is damaged ({}); save the checkpoint again",
         checkpoint_iter_dir(dir, meta.iteration), json_error_text(e));
  }
}

void checkpoint_save(const std::string& dir, const CheckpointMeta& meta,
                     const CheckpointShard& shard) {
  checkpoint_save_shard(dir, meta.iteration, shard);
  checkpoint_commit(dir, meta);
}

}  // namespace infinipipe
