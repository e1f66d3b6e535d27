// The byte-level tokenizer: bytes 0..255 are tokens 0..255, and 256 ends a document.
// No vocabulary file, no merges: any text round-trips, which keeps `data prepare` and the
// synthetic corpus self-contained (a model trained on it has vocab_size 257).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/tokenizer.h"

namespace infinipipe::tokenize {

inline constexpr int32_t kByteEod = 256;
inline constexpr int32_t kByteVocabSize = 257;

inline std::vector<int32_t> byte_tokenize(std::string_view text, bool append_eod) {
  std::vector<int32_t> out;
  out.reserve(text.size() + 1);
  for (const char c : text) out.push_back(static_cast<unsigned char>(c));
  if (append_eod) out.push_back(kByteEod);
  return out;
}

// Text of tokens, for printing samples: end-of-document shows as "<eod>", any token outside
// the vocabulary as "<?>".
inline std::string byte_detokenize(std::span<const int32_t> tokens) {
  std::string out;
  out.reserve(tokens.size());
  for (const int32_t t : tokens) {
    if (t >= 0 && t < 256) {
      out.push_back(static_cast<char>(static_cast<unsigned char>(t)));
    } else {
      out += t == kByteEod ? "<eod>" : "<?>";
    }
  }
  return out;
}

// --tokenizer-type ByteTokenizer; ConfigError when given a --tokenizer-model (it reads none).
std::unique_ptr<Tokenizer> byte_tokenizer_open(const std::string& model_path);

}  // namespace infinipipe::tokenize
