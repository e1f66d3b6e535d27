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
#include "ckpt/safetensors.h"
#include "core/error.h"
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
  return json_parse(fs_read_text(path), path, "the checkpoint is damaged");
}

namespace {

Json file_entry(const FileChecksum& c) {
  return {{"crc32c", checksum_hex(c.crc32c)}, {"bytes", c.bytes}};
}

// Writes a small JSON file atomically and returns its checksum entry.
Json write_json(const fs::path& path, const Json& j) {
  const std::string text = j.dump(2) + "\n";
  fs_write_atomic(path.string(), text);
  return file_entry({checksum_crc32c(0, text.data(), text.size()), int64_t(text.size())});
}

}  // namespace

void checkpoint_save_shard(const std::string& dir, int64_t iteration,
                           const CheckpointShard& shard) {
  if (iteration < 0) fail("checkpoint: iteration {} is negative", iteration);
  if (shard.num_ranks < 1 || shard.rank < 0 || shard.rank >= shard.num_ranks) {
    fail("checkpoint: rank {} is not in [0, {})", shard.rank, shard.num_ranks);
  }
  const fs::path iter_dir = checkpoint_iter_dir(dir, iteration);
  fs_make_dirs(iter_dir.string());
  // Re-saving an iteration: drop the old state.json first so the directory counts as incomplete
  // until the new commit, instead of pairing old checksums with new files.
  const fs::path state = iter_dir / kCkptState;
  if (::unlink(state.c_str()) == 0) {
    fs_sync_dir(iter_dir.string());
  } else if (errno != ENOENT) {
    fail("cannot remove {}: {}", state.string(), std::strerror(errno));
  }

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

  const std::string model_file = checkpoint_shard_file("model", shard.rank, shard.num_ranks);
  const std::string optim_file = checkpoint_shard_file("optimizer", shard.rank, shard.num_ranks);
  const SafetensorsWritten mw = model.write((iter_dir / model_file).string());
  const SafetensorsWritten ow = optim.write((iter_dir / optim_file).string());

  int64_t model_bytes = 0;
  for (const CheckpointTensor& t : shard.params) model_bytes += int64_t(t.data.size()) * 4;
  const Json manifest = {
      {"rank", shard.rank},
      {"num_ranks", shard.num_ranks},
      {"iteration", iteration},
      {"optimizer", kind},
      {"files",
       {{model_file, file_entry({mw.crc32c, mw.bytes})},
        {optim_file, file_entry({ow.crc32c, ow.bytes})}}},
      {"model_file", model_file},
      {"optimizer_file", optim_file},
      {"model_tensors", model_names},
      {"model_bytes", model_bytes},
      {"optimizer_tensors", optim_names},
      {"rank_state", shard.rank_state},
  };
  // Written last: its presence says this rank's shard is complete and on disk.
  write_json(iter_dir / checkpoint_manifest_file(shard.rank), manifest);
}

namespace {

void commit_checked(const std::string& dir, const CheckpointMeta& meta) {
  const fs::path iter_dir = checkpoint_iter_dir(dir, meta.iteration);
  auto manifest_of = [&](int64_t rank) {
    const fs::path p = iter_dir / checkpoint_manifest_file(rank);
    if (!fs::exists(p)) {
      fail(
          "checkpoint {}: rank {} has not finished its shard ({} is missing); every rank must "
          "call checkpoint_save_shard before the commit",
          iter_dir.string(), rank, p.filename().string());
    }
    Json m = checkpoint_read_json(p.string());
    if (m.value("iteration", int64_t(-1)) != meta.iteration || !m.contains("files")) {
      fail("{}: manifest of another iteration or damaged", p.string());
    }
    return m;
  };
  const Json first = manifest_of(0);
  const int64_t num_ranks = first.value("num_ranks", int64_t(0));
  if (num_ranks < 1) fail("{}: bad num_ranks in the rank 0 manifest", iter_dir.string());

  Json files = Json::object();
  Json model_map = Json::object(), optim_map = Json::object();
  Json rank_states = Json::array();
  std::set<std::string> keep = {kCkptState};
  std::string kind;
  int64_t model_bytes = 0;
  for (int64_t r = 0; r < num_ranks; r++) {
    const Json m = r == 0 ? first : manifest_of(r);
    if (m.value("num_ranks", int64_t(0)) != num_ranks) {
      fail(
          "checkpoint {}: rank {} wrote its shard for {} ranks, rank 0 for {}; remove the "
          "directory and save again",
          iter_dir.string(), r, m.value("num_ranks", int64_t(0)), num_ranks);
    }
    const std::string k = m.value("optimizer", "none");
    if (r > 0 && k != kind)
      fail("checkpoint {}: ranks saved different optimizers ({} and {})", iter_dir.string(), kind,
           k);
    kind = k;
    for (const auto& [file, entry] : m.at("files").items()) {
      const fs::path p = iter_dir / file;
      std::error_code ec;
      const auto size = fs::file_size(p, ec);
      if (ec || int64_t(size) != entry.value("bytes", int64_t(-1))) {
        fail("checkpoint {}: shard file {} of rank {} is missing or has the wrong size",
             iter_dir.string(), file, r);
      }
      files[file] = entry;
      keep.insert(file);
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
    add_all(model_map, "model_tensors", "model_file");
    add_all(optim_map, "optimizer_tensors", "optimizer_file");
    model_bytes += m.value("model_bytes", int64_t(0));
    rank_states.push_back(m.value("rank_state", Json::object()));
    keep.insert(checkpoint_manifest_file(r));
  }

  files[kCkptConfig] = write_json(iter_dir / kCkptConfig, checkpoint_hf_config(meta.model));
  files[kCkptModelIndex] =
      write_json(iter_dir / kCkptModelIndex,
                 {{"metadata", {{"total_size", model_bytes}}}, {"weight_map", model_map}});
  files[kCkptOptimIndex] = write_json(iter_dir / kCkptOptimIndex,
                                      {{"metadata", Json::object()}, {"weight_map", optim_map}});
  keep.insert({kCkptConfig, kCkptModelIndex, kCkptOptimIndex});

  // Files of an earlier, abandoned attempt at this iteration (other layout, temporaries).
  for (const auto& entry : fs::directory_iterator(iter_dir)) {
    if (!keep.count(entry.path().filename().string())) fs::remove_all(entry.path());
  }

  const Json state = {
      {"format", "infinipipe-checkpoint"},
      {"version", kCkptFormatVersion},
      {"iteration", meta.iteration},
      {"consumed_samples", meta.consumed_samples},
      {"num_ranks", num_ranks},
      {"optimizer", kind},
      {"rng", meta.rng},
      {"config", meta.config},
      {"rank_states", rank_states},
      {"files", files},
  };
  write_json(iter_dir / kCkptState, state);  // the checkpoint exists from here on

  const std::string latest = fmt::format("{}\n", meta.iteration);
  fs_write_atomic((fs::path(dir) / kCkptLatest).string(), latest);
  fs_write_atomic((fs::path(dir) / kCkptLatestMegatron).string(), latest);
}

}  // namespace

void checkpoint_commit(const std::string& dir, const CheckpointMeta& meta) {
  try {
    commit_checked(dir, meta);
  } catch (const nlohmann::json::exception& e) {
    fail("checkpoint {}: a shard manifest is damaged ({}); save the checkpoint again",
         checkpoint_iter_dir(dir, meta.iteration), e.what());
  }
}

void checkpoint_save(const std::string& dir, const CheckpointMeta& meta,
                     const CheckpointShard& shard) {
  checkpoint_save_shard(dir, meta.iteration, shard);
  checkpoint_commit(dir, meta);
}

}  // namespace infinipipe
