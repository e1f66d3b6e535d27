#include "runtime/checkpoint_meta.h"

#include <filesystem>

#include <fmt/format.h>

#include "ckpt/hf_folder.h"
#include "core/error.h"
#include "tokenize/hf_tokenizer.h"
#include "tokenize/tokenizer.h"
#include "tokenize/tokenizer_saved.h"
#include "tokenize/tokenizer_types.h"

namespace infinipipe::runtime {

namespace {

// The folder whose tokenizer files describe what `dir` starts the run from, or "".
std::string start_folder(const std::string& dir) {
  if (dir.empty()) return "";
  if (const auto it = checkpoint_find_latest(dir)) return checkpoint_iter_dir(dir, *it);
  return hf_folder_is(dir) ? dir : "";
}

}  // namespace

RunTokenizer run_tokenizer(const TrainingConfig& tc) {
  // Flags given win (a --tokenizer-model alone is opened as the default type, which names it).
  RunTokenizer out{
      tc.tokenizer_type.empty() ? std::string(tokenize::kDefaultTokenizerType) : tc.tokenizer_type,
      tc.tokenizer_model, ""};
  if (!tc.tokenizer_type.empty() || !tc.tokenizer_model.empty()) return out;
  for (const std::string& dir : {tc.load, tc.pretrained_checkpoint}) {
    const std::string folder = start_folder(dir);
    if (folder.empty()) continue;
    namespace fs = std::filesystem;
    // A folder without any tokenizer file (weights only) says nothing: the default stands.
    if (!fs::exists(fs::path(folder) / tokenize::kTokenizerConfigFile) &&
        !fs::exists(fs::path(folder) / tokenize::kTokenizerJsonFile)) {
      continue;
    }
    std::unique_ptr<tokenize::Tokenizer> t;
    try {
      t = tokenize::tokenizer_open_saved(folder);
    } catch (const ConfigError& e) {
      fail_config(
          "{}; the run takes the tokenizer of the folder it starts from ({}) unless "
          "--tokenizer-type / --tokenizer-model name one",
          e.what(), dir);
    }
    out.type = t->type();
    out.folder = folder;
    if (tokenize::tokenizer_type_has_json(out.type)) out.model = folder;
    if (tokenize::tokenizer_type_has_model(out.type)) {
      out.model = (fs::path(folder) / tokenize::kTokenizerModelFile).string();
    }
    return out;
  }
  return out;
}

Config config_with_run_tokenizer(const Config& cfg) {
  Config out = cfg;
  const RunTokenizer run = run_tokenizer(cfg.training);
  out.training.tokenizer_type = run.type;
  out.training.tokenizer_model = run.model;
  return out;
}

CheckpointTokenizer checkpoint_tokenizer(const Config& cfg) {
  const RunTokenizer tc = run_tokenizer(cfg.training);
  const auto tokenizer = tokenize::tokenizer_open(tc.type, tc.model);
  if (tokenizer->vocab_size() > cfg.model.vocab_size) {
    fail_config(
        "the tokenizer {}{} has {} tokens, more than the model's --vocab-size {}; raise "
        "--vocab-size to at least {} or use the tokenizer the data was prepared with",
        tc.type, tc.folder.empty() ? "" : " of " + tc.folder, tokenizer->vocab_size(),
        cfg.model.vocab_size, tokenizer->vocab_size());
  }
  CheckpointTokenizer out;
  out.tokenizer_config = tokenize::tokenizer_saved_config(*tokenizer, cfg.model.max_positions());
  // The files it was read from, copied into every checkpoint so the folder is self-contained.
  if (tokenize::tokenizer_type_has_model(tc.type)) out.model_file = tc.model;
  if (tokenize::tokenizer_type_has_json(tc.type)) {
    out.json_file = tokenize::hf_tokenizer_source(*tokenizer).tokenizer_json;
  }
  out.bos = tokenizer->bos();
  out.eos = tokenizer->eos();
  out.eod = tokenizer->eod();
  return out;
}

namespace {

std::string samples_text(int64_t piece_length) {
  if (piece_length == 0) return "whole documents (--long-documents truncate)";
  return fmt::format("pieces of {} tokens (--long-documents split --seq-length {})", piece_length,
                     piece_length);
}

}  // namespace

void checkpoint_samples_check(const Config& cfg, const nlohmann::json& rng,
                              const std::string& dir) {
  int64_t saved = 0;
  if (rng.is_object() && rng.contains("long_documents_split")) {
    const nlohmann::json& v = rng.at("long_documents_split");
    if (!v.is_number_integer() || v.get<int64_t>() < 1)
      fail("{}: its state's long_documents_split is {}, not a length; the checkpoint is damaged",
           dir, v.dump());
    saved = v.get<int64_t>();
  }
  const int64_t now =
      cfg.training.long_documents == LongDocuments::split ? cfg.model.seq_length : 0;
  if (saved == now) return;
  fail_config(
      "{} was saved by a run whose samples are {}, and its data position counts those; this run's "
      "are {}: resume with {}, or start a new run without --load",
      dir, samples_text(saved), samples_text(now),
      saved == 0 ? std::string("--long-documents truncate")
                 : fmt::format("--long-documents split --seq-length {}", saved));
}

CheckpointMeta checkpoint_meta(const Config& cfg, const std::string& config_yaml,
                               const CheckpointTokenizer& tokenizer, int64_t iteration,
                               int64_t consumed_samples, const nlohmann::json& delay_state) {
  CheckpointMeta meta;
  meta.iteration = iteration;
  meta.consumed_samples = consumed_samples;
  meta.model = cfg.model;
  // Training draws no random numbers: the data order is the sampler's seeded shuffle, fully
  // determined by (seed, consumed samples, the outlier delay's documents), and the
  // initialisation only by the seed.
  meta.rng = {{"generator", "none"},
              {"data_order_seed", cfg.training.seed},
              {"consumed_samples", consumed_samples}};
  // With --outlier-delay the position also holds the documents drawn but not trained yet.
  if (cfg.parallel.outlier_delay) meta.rng["outlier_delay"] = delay_state;
  // With --long-documents split the position counts pieces of this length.
  if (cfg.training.long_documents == LongDocuments::split)
    meta.rng["long_documents_split"] = cfg.model.seq_length;
  meta.config = {{"format", "yaml"}, {"yaml", config_yaml}};
  meta.tokenizer = tokenizer;
  return meta;
}

}  // namespace infinipipe::runtime
