// The tokenizer a checkpoint was trained with, from the files saved beside its weights:
// tokenizer_config.json names it by its Megatron --tokenizer-type in "infinipipe_tokenizer_type",
// and the SentencePiece kinds keep their model as tokenizer.model. A directory without
// tokenizer_config.json is from before checkpoints carried their tokenizer: every one of those
// used the byte tokenizer.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace infinipipe::data {

inline constexpr const char* kTokenizerConfigFile = "tokenizer_config.json";
inline constexpr const char* kTokenizerModelFile = "tokenizer.model";

// ConfigError naming the file when tokenizer_config.json is unreadable, lacks the type, names an
// unknown one, or a SentencePiece type's tokenizer.model is missing.
std::unique_ptr<Tokenizer> tokenizer_open_saved(const std::string& dir);

}  // namespace infinipipe::data
