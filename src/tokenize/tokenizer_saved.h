// The tokenizer a saved Hugging Face folder describes (written by `train --save` and
// `checkpoint export`), so `generate` and others decode with the tokenizer the model was trained
// with. Convention:
//   tokenizer_config.json  {"tokenizer_class": "LlamaTokenizer" for the SentencePiece kinds
//                           (null for ByteTokenizer, which Hugging Face has no class for),
//                           "infinipipe_tokenizer_type": the --tokenizer-type name,
//                           "add_bos_token", "add_eos_token", "model_max_length"}
//   tokenizer.model        the SentencePiece model, byte for byte (SentencePiece kinds only)
//   tokenizer.json         the Hugging Face tokenizer, byte for byte (HuggingFaceTokenizer; its
//                          tokenizer_config.json is the original one plus the fields above)
// A plain Hugging Face folder (no infinipipe field) opens as HuggingFaceTokenizer when it has a
// tokenizer.json (as transformers' fast tokenizers do), else as Llama2Tokenizer when it is a
// LlamaTokenizer with tokenizer.model; a folder without tokenizer_config.json (saved before
// checkpoints carried their tokenizer) opens as the byte tokenizer, which all of those used.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenize/tokenizer.h"

namespace infinipipe::tokenize {

inline constexpr const char* kTokenizerConfigFile = "tokenizer_config.json";
inline constexpr const char* kTokenizerModelFile = "tokenizer.model";
inline constexpr const char* kTokenizerJsonFile = "tokenizer.json";

// tokenizer_config.json for `tokenizer` (of the type tokenizer.type()).
nlohmann::json tokenizer_saved_config(const Tokenizer& tokenizer, int64_t model_max_length);
// Whether the type reads a SentencePiece model (and so saves tokenizer.model).
bool tokenizer_type_has_model(const std::string& type);
// Whether the type reads a Hugging Face tokenizer.json (and so saves it).
bool tokenizer_type_has_json(const std::string& type);

// Opens the tokenizer DIR describes. ConfigError saying what is missing or unsupported: an
// unknown type, a missing tokenizer.model, a symbolic link.
std::unique_ptr<Tokenizer> tokenizer_open_saved(const std::string& dir);

}  // namespace infinipipe::tokenize
