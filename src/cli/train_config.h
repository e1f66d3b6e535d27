// The configuration of a training run, for `infinipipe train` and the PyTorch trainer alike:
// the options over the defaults, or, starting from a Hugging Face folder (--load or
// --pretrained-checkpoint), over the model its config.json defines.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "options/options.h"

namespace infinipipe::cli {

// What the run's options apply to: the defaults, or, starting from a Hugging Face folder, the
// model its config.json defines (`folder` names it, else empty).
Config train_defaults(const options::ConfigOptions& options, std::string& folder);

// The run's configuration, validated. Starting from a Hugging Face folder, model flags may
// repeat its config.json but not contradict it (ConfigError naming the differences).
Config resolve_train_config(const options::ConfigOptions& options);
// The same from command-line words (the PyTorch trainer's).
Config resolve_train_config_args(const std::vector<std::string>& args);

}  // namespace infinipipe::cli
