#include "data/tokenizer.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/byte_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"

namespace infinipipe::data {

namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    return byte_tokenize(text, false);
  }
  std::string decode(std::span<const int32_t> ids) const override { return byte_detokenize(ids); }
  int64_t vocab_size() const override { return kByteVocabSize; }
  int32_t eod() const override { return kByteEod; }
  int32_t bos() const override { return -1; }
  int32_t eos() const override { return kByteEod; }
  const std::string& type() const override { return type_; }

 private:
  std::string type_ = "ByteTokenizer";
};

}  // namespace

const std::vector<std::string>& tokenizer_types() {
  static const std::vector<std::string> types{"ByteTokenizer", "SentencePieceTokenizer",
                                              "GPTSentencePieceTokenizer", "Llama2Tokenizer",
                                              "HuggingFaceTokenizer"};
  return types;
}

std::unique_ptr<Tokenizer> tokenizer_open(const std::string& type, const std::string& model_path) {
  if (type == "ByteTokenizer") {
    if (!model_path.empty()) {
      fail_config(
          "--tokenizer-model {} is not used by ByteTokenizer; drop it or pick a "
          "SentencePiece --tokenizer-type",
          model_path);
    }
    return std::make_unique<ByteTokenizer>();
  }
  if (type == "SentencePieceTokenizer" || type == "GPTSentencePieceTokenizer" ||
      type == "Llama2Tokenizer") {
    return sentencepiece_tokenizer_open(type, model_path);
  }
  if (type == "HuggingFaceTokenizer") return hf_tokenizer_open(model_path);
  fail_config("--tokenizer-type {} is not supported; use one of: {}", type,
              fmt::join(tokenizer_types(), ", "));
}

}  // namespace infinipipe::data
