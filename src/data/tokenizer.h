// Tokenizers of `infinipipe data prepare`, by Megatron-LM's --tokenizer-type names:
//   ByteTokenizer (infinipipe's default: bytes 0..255, end of document 256, vocab 257, no model),
//   SentencePieceTokenizer (Megatron's: the model's pieces plus <CLS> <SEP> <EOD> <MASK> and the
//     pad/bos/eos pieces as special tokens, added at the end of the vocabulary when missing and
//     matched literally in the text; end of document = <EOD>),
//   GPTSentencePieceTokenizer (the model as it is; end of document = eos),
//   Llama2Tokenizer (the model as it is, bos before every document; end of document = eos),
//   HuggingFaceTokenizer (Megatron's: a Hugging Face tokenizer.json with its tokenizer_config.json,
//     hf_tokenizer.h; end of document = eos_token),
// the SentencePiece ones through the SentencePiece library and its .model file (--tokenizer-model).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace infinipipe::data {

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

// ConfigError for an unknown type (naming the supported ones), a missing --tokenizer-model, or
// a model file the library cannot load.
std::unique_ptr<Tokenizer> tokenizer_open(const std::string& type, const std::string& model_path);

// The --tokenizer-type values tokenizer_open accepts.
const std::vector<std::string>& tokenizer_types();

}  // namespace infinipipe::data
