// The configuration of a training run, for `infinipipe train` and the PyTorch trainer alike:
// the options over the defaults, or, starting from a Hugging Face folder (--load or
// --pretrained-checkpoint), over the model its config.json defines.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "options/options.h"

namespace infinipipe::setup {

// What the run's options apply to: the defaults, or, starting from a Hugging Face folder, the
// model its config.json defines (`folder` names it, else empty).
Config train_defaults(const options::ConfigOptions& options, std::string& folder);

// The options `train` cannot honour, each problem with its fix: the runtime's refusals
// (runtime/train.h), the tokenizer the checkpoints record, the data flags' syntax. `config check`
// runs them, so it refuses what train refuses.
void train_option_problems(const Config& cfg, std::vector<std::string>& problems);
// Those, and what a run of world_size processes needs (pp x dp = world_size, a dataset).
void train_run_problems(const Config& cfg, int64_t world_size, std::vector<std::string>& problems);
// Options whose resolution runs train's checks: a run's, or without one (`config check`) the
// options' only.
void train_checks_install(options::ConfigOptions& options, bool run);

// The run's configuration, validated. Starting from a Hugging Face folder, model flags may
// repeat its config.json but not contradict it (ConfigError naming the differences).
Config resolve_train_config(const options::ConfigOptions& options);
// A run of a model that a Hugging Face config.json's text defines (transformers' model in
// memory, infinipipe.torch.wrap); `origin` names it in messages; otherwise as
// resolve_train_config_args.
Config resolve_hf_config_args(const std::string& config_json, const std::string& origin,
                              const std::vector<std::string>& args, int64_t world_size = 0);
// The same from command-line words (the PyTorch trainer's); world_size > 0: the run's processes,
// from which dp is derived when the words do not give it.
Config resolve_train_config_args(const std::vector<std::string>& args, int64_t world_size = 0);

}  // namespace infinipipe::setup
