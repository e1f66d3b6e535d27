#include "tokenize/byte_tokenizer.h"

#include "core/error.h"

namespace infinipipe::tokenize {

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

std::unique_ptr<Tokenizer> byte_tokenizer_open(const std::string& model_path) {
  if (!model_path.empty()) {
    fail_config(
        "--tokenizer-model {} is not used by ByteTokenizer; drop it or pick a "
        "SentencePiece --tokenizer-type",
        model_path);
  }
  return std::make_unique<ByteTokenizer>();
}

}  // namespace infinipipe::tokenize
