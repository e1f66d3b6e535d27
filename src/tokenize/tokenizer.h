// A tokenizer of `infinipipe data prepare`, `train` and `generate`, by Megatron-LM's
// --tokenizer-type names. The types are the rows of tokenizer_types.h (their names, help, files,
// openers); the SentencePiece ones go through the SentencePiece library and its .model file
// (--tokenizer-model), HuggingFaceTokenizer through infinipipe's own reader (hf_tokenizer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace infinipipe::tokenize {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The token ids of one document's text (Llama2Tokenizer: with bos first). Thread-safe.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t eod() const = 0;  // what --append-eod appends
  virtual int32_t bos() const = 0;  // -1 when the tokenizer has none
  virtual int32_t eos() const = 0;  // -1 when the tokenizer has none
  virtual const std::string& type() const = 0;
};

// What a saved folder that names no infinipipe_tokenizer_type says of its tokenizer (a plain
// Hugging Face folder), for the rows' detectors.
struct SavedFolder {
  std::string tokenizer_class;  // tokenizer_config.json's ("" when it has none)
  bool has_tokenizer_json = false;
};

// The row of `type` opened from --tokenizer-model: ConfigError for an unknown type (naming the
// supported ones), a missing --tokenizer-model, or a model file the library cannot load.
std::unique_ptr<Tokenizer> tokenizer_open(const std::string& type, const std::string& model_path);

}  // namespace infinipipe::tokenize
