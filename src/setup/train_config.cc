#include "setup/train_config.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_config.h"
#include "ckpt/hf_config.h"
#include "ckpt/hf_folder.h"
#include "core/error.h"
#include "core/json_read.h"
#include "data/blend.h"
#include "data/run_datasets.h"
#include "data/split.h"
#include "model/lr_schedule.h"
#include "runtime/checkpoint_meta.h"
#include "runtime/train.h"

namespace infinipipe::setup {
namespace {

// The Hugging Face folder the run starts from (--load, else --pretrained-checkpoint), if any.
std::string hf_start_folder(const TrainingConfig& tc) {
  for (const std::string& dir : {tc.load, tc.pretrained_checkpoint}) {
    if (!dir.empty() && !checkpoint_find_latest(dir) && hf_folder_is(dir)) return dir;
  }
  return "";
}

// A check that throws, collected as one problem.
void problem_add(std::vector<std::string>& problems, const std::function<void()>& check) {
  try {
    check();
  } catch (const ConfigError& e) {
    problems.push_back(e.what());
  }
}

}  // namespace

void train_option_problems(const Config& cfg, std::vector<std::string>& problems) {
  for (std::string& p : runtime::train_config_problems(cfg, 0)) problems.push_back(std::move(p));
  // The learning-rate schedule as the optimizer builds it (a warm-up as long as the decay).
  problem_add(problems, [&] { LrSchedule::from_config(cfg.training); });
  // The tokenizer a checkpoint records is opened as the trainer opens it.
  problem_add(problems, [&] { runtime::checkpoint_tokenizer(cfg); });
  const TrainingConfig& t = cfg.training;
  for (const std::string* blend :
       {&t.data_path, &t.train_data_path, &t.valid_data_path, &t.test_data_path}) {
    if (!blend->empty())
      problem_add(problems, [&] { data::blend_parse(data::blend_words(*blend)); });
  }
  if (!t.data_path.empty()) problem_add(problems, [&] { data::split_parse(t.split); });
}

void train_run_problems(const Config& cfg, int64_t world_size, std::vector<std::string>& problems) {
  for (std::string& p : runtime::train_run_problems(cfg, static_cast<int>(world_size)))
    problems.push_back(std::move(p));
  std::vector<std::string> options;
  train_option_problems(cfg, options);
  // The runtime's own are in both lists; each is named once.
  for (std::string& p : options)
    if (std::find(problems.begin(), problems.end(), p) == problems.end())
      problems.push_back(std::move(p));
}

void train_checks_install(options::ConfigOptions& options, bool run) {
  if (run) {
    options.command_checks = train_run_problems;
  } else {
    options.command_checks = [](const Config& cfg, int64_t, std::vector<std::string>& problems) {
      train_option_problems(cfg, problems);
    };
  }
}

namespace {

// The defaults with the model a Hugging Face config.json defines.
Config defaults_with_model(const ModelConfig& hf) {
  Config base;
  const int64_t seq_length = base.model.seq_length;
  base.model = hf;
  base.model.seq_length = std::min(seq_length, base.model.max_position_embeddings);
  // A sliding window shorter than that is not honoured (Config::validate): the default stays
  // inside it, so only an explicit longer --seq-length is refused.
  if (base.model.sliding_window > 0)
    base.model.seq_length = std::min(base.model.seq_length, base.model.sliding_window);
  return base;
}

// The options over `base`, whose model flags may repeat its model but not contradict it.
Config resolve_over_model(const options::ConfigOptions& options, const Config& base,
                          const std::string& origin) {
  const Config cfg = options::resolve_config(options, base);
  const std::vector<std::string> diff = checkpoint_model_diff(base.model, cfg.model);
  if (!diff.empty()) {
    fail_config(
        "{} is a Hugging Face model whose config.json defines the model, and the model flags "
        "contradict it: {}; drop those flags (the folder sets them) or load another folder",
        origin, fmt::join(diff, "; "));
  }
  return cfg;
}

}  // namespace

Config train_defaults(const options::ConfigOptions& options, std::string& folder) {
  const Config user = options::resolve_config_lenient(options);
  folder = hf_start_folder(user.training);
  if (folder.empty()) return Config{};
  HfModelReader reader(folder);
  // Every rank reads the folder here first: tensors the model does not have are refused
  // before anything is built (the loader reads only the tensors it needs).
  if (!user.training.ignore_unexpected_keys) reader.refuse_unexpected_tensors();
  return defaults_with_model(reader.model());
}

Config resolve_train_config(const options::ConfigOptions& options) {
  std::string folder;
  const Config base = train_defaults(options, folder);
  if (folder.empty()) return options::resolve_config(options);
  return resolve_over_model(options, base, folder);
}

Config resolve_hf_config_args(const std::string& config_json, const std::string& origin,
                              const std::vector<std::string>& args, int64_t world_size) {
  const ModelConfig hf =
      hf_config_to_model(json_parse(config_json, origin, "give transformers' config.json"),
                         origin);
  const options::ParsedArgs parsed = options::parse_config_args(args);
  parsed.options->world_size = world_size;
  return resolve_over_model(*parsed.options, defaults_with_model(hf), origin);
}

Config resolve_train_config_args(const std::vector<std::string>& args, int64_t world_size) {
  const options::ParsedArgs parsed = options::parse_config_args(args);
  parsed.options->world_size = world_size;
  return resolve_train_config(*parsed.options);
}

}  // namespace infinipipe::setup
