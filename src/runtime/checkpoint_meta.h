// What every checkpoint of a training run records besides its tensors (ckpt/checkpoint.h's
// CheckpointMeta), the same whichever runtime saves it, so a run resumes in the other exactly.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "core/config.h"

namespace infinipipe::runtime {

// The run's tokenizer: --tokenizer-type / --tokenizer-model when either is given (in flags or
// the --config file), else the tokenizer that the folder of --load / --pretrained-checkpoint
// records (a Hugging Face folder's tokenizer.json or tokenizer.model, a checkpoint's own
// record), so a model continues with the tokenizer it was trained with, else ByteTokenizer.
struct RunTokenizer {
  std::string type, model;
  std::string folder;  // where it was taken from ("": the flags or the default)
};
RunTokenizer run_tokenizer(const TrainingConfig& tc);
// `cfg` with the run's tokenizer written in: what `config show` prints and a run records as its
// configuration (given again, it names the same tokenizer).
Config config_with_run_tokenizer(const Config& cfg);

// The run's tokenizer as a checkpoint records it for Hugging Face users; ConfigError when it
// has more tokens than the model's vocabulary.
CheckpointTokenizer checkpoint_tokenizer(const Config& cfg);

// The run's state at `iteration`: the data position (`consumed_samples`, and with
// --outlier-delay the delay's saved documents, `delay_state`), the configuration as YAML, the
// model and the tokenizer.
CheckpointMeta checkpoint_meta(const Config& cfg, const std::string& config_yaml,
                               const CheckpointTokenizer& tokenizer, int64_t iteration,
                               int64_t consumed_samples, const nlohmann::json& delay_state);

// The data position counts samples: whole documents, or with --long-documents split pieces of
// --seq-length tokens, which a checkpoint records (rng "long_documents_split"). Resuming `dir`
// with samples of another kind would continue another order: ConfigError saying which to use.
void checkpoint_samples_check(const Config& cfg, const nlohmann::json& rng, const std::string& dir);

}  // namespace infinipipe::runtime
