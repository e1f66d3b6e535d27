// What each runtime that trains cannot honour, in one table (train_capabilities.cc): a row per
// option a runtime refuses, with the message that says what to change. `infinipipe train` and
// `config check` read the engine's column, `python3 -m infinipipe.torch.train` the PyTorch one
// (through ip.train_problems), so an option is honoured or refused, never ignored.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace infinipipe::runtime {

enum class TrainRuntime {
  engine,        // the C++ engine (`infinipipe train`)
  torch,         // infinipipe.torch with infinipipe's own Llama modules
  transformers,  // infinipipe.torch with a transformers model's own modules (--hf-model)
};

// Every option of `cfg` `runtime` cannot honour, one message each; world_size > 0 also checks
// pp × dp against the engine's processes (0: the number is not known, as in `config check`).
// `given`: the flags the command line names ("--measure-links-interval"), so one a runtime
// refuses is refused when given at its default too.
std::vector<std::string> train_config_problems(const Config& cfg, int world_size,
                                               TrainRuntime runtime = TrainRuntime::engine,
                                               const std::vector<std::string>& given = {});
// Those and a run's own needs (a dataset to train on).
std::vector<std::string> train_run_problems(const Config& cfg, int world_size,
                                            TrainRuntime runtime = TrainRuntime::engine,
                                            const std::vector<std::string>& given = {});
// The first of train_run_problems as a ConfigError.
void train_check_config(const Config& cfg, int world_size = 1,
                        TrainRuntime runtime = TrainRuntime::engine);

}  // namespace infinipipe::runtime
