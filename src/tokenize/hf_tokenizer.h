// --tokenizer-type HuggingFaceTokenizer: a Hugging Face tokenizer.json (byte-level BPE as in
// Llama 3, Qwen and GPT-2, or BPE with byte fallback as in Mistral and Llama 2 conversions) with
// its tokenizer_config.json, read and run by infinipipe itself (Debian packages no C++ reader).
// Encoding follows the reference pipeline: ill-formed UTF-8 becomes U+FFFD, added tokens are
// cut out first, then normalizer, pre-tokenizer, BPE and the post-processor's template; the
// special tokens bos/eos are tokenizer_config.json's bos_token/eos_token. docs/data.md lists
// the supported components; any other is refused by name when the file is read.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenize/tokenizer.h"

namespace infinipipe::tokenize {

inline constexpr const char* kHfTokenizerJsonFile = "tokenizer.json";

// The two files of --tokenizer-model PATH: PATH/tokenizer.json and PATH/tokenizer_config.json
// for a folder; for a file, the file and the tokenizer_config.json beside it.
struct HfTokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config;  // "" when there is none
};
HfTokenizerFiles hf_tokenizer_files(const std::string& path);

// ConfigError for missing files, anything out of bounds, unsupported components, or no
// eos_token (documents end with it).
std::unique_ptr<Tokenizer> hf_tokenizer_open(const std::string& path);

// A folder with a tokenizer.json (as transformers' fast tokenizers save) holds a
// HuggingFaceTokenizer.
bool hf_tokenizer_detect(const SavedFolder& folder);

// From the files' text (the fuzz target and tests); `where` names them in messages.
// `config_json` empty: no tokenizer_config.json.
std::unique_ptr<Tokenizer> hf_tokenizer_parse(std::string_view tokenizer_json,
                                              std::string_view config_json,
                                              const std::string& where);

// The files an opened HuggingFaceTokenizer was read from (empty for one made by
// hf_tokenizer_parse and for other types), which checkpoints copy.
HfTokenizerFiles hf_tokenizer_source(const Tokenizer& tokenizer);

// tokenizer_config.json for a checkpoint of a model trained with `tokenizer` (a
// HuggingFaceTokenizer): the one it was read with (or {}), plus infinipipe_tokenizer_type,
// bos_token/eos_token when it had none and model_max_length, so the saved folder reopens
// (with the tokenizer.json beside it) to the same tokenizer, in infinipipe and transformers.
nlohmann::json hf_tokenizer_saved_config(const Tokenizer& tokenizer, int64_t model_max_length);

}  // namespace infinipipe::tokenize
