// The tokenizer types, one row each: the --tokenizer-type name, what it is, the file it reads
// (--tokenizer-model) and a checkpoint saves beside its weights, how it opens, and how a
// Hugging Face folder without infinipipe's record is recognised as it. The option help of
// `train`, `data prepare` and `generate`, opening a run's tokenizer, the files a checkpoint saves
// and opening a saved folder all read this table: a new type is its reader file and one row
// (docs/architecture.md, "Where to add: a tokenizer").
#pragma once

#include <array>
#include <cstddef>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>

#include "tokenize/byte_tokenizer.h"
#include "tokenize/hf_tokenizer.h"
#include "tokenize/sentencepiece_tokenizer.h"
#include "tokenize/tokenizer.h"

namespace infinipipe::tokenize {

// The file a type reads and a checkpoint copies byte for byte.
enum class TokenizerFile {
  none,                 // nothing: --tokenizer-model is refused
  sentencepiece_model,  // --tokenizer-model FILE.model, saved as tokenizer.model
  hf_tokenizer_json,    // --tokenizer-model a folder or its tokenizer.json, saved as tokenizer.json
};

struct TokenizerType {
  std::string_view name;  // --tokenizer-type
  std::string_view help;  // what it is, one phrase
  TokenizerFile file;
  // Opens it from --tokenizer-model (ConfigError when the file is missing, unusable, or given
  // to a type that reads none).
  std::unique_ptr<Tokenizer> (*open)(const std::string& model_path);
  // Whether a saved folder that names no infinipipe_tokenizer_type holds this type (nullptr:
  // only a folder that names it does).
  bool (*detect)(const SavedFolder& folder);
  // Whether it puts bos before every document (a checkpoint saves it as add_bos_token).
  bool bos_first = false;
};

inline constexpr TokenizerType kTokenizerTypes[] = {
    {"ByteTokenizer", "bytes 0..255, end of document 256; no model file", TokenizerFile::none,
     byte_tokenizer_open, nullptr},
    {"SentencePieceTokenizer",
     "Megatron's: the model's pieces plus <CLS> <SEP> <EOD> <MASK>, end of document <EOD>",
     TokenizerFile::sentencepiece_model, sentencepiece_megatron_open, nullptr},
    {"GPTSentencePieceTokenizer", "the SentencePiece model as it is, end of document eos",
     TokenizerFile::sentencepiece_model, sentencepiece_plain_open, nullptr},
    {"Llama2Tokenizer", "the SentencePiece model as it is, bos before every document",
     TokenizerFile::sentencepiece_model, sentencepiece_llama2_open, sentencepiece_llama2_detect,
     true},
    {"HuggingFaceTokenizer",
     "a Hugging Face tokenizer.json with its tokenizer_config.json, end of document eos_token",
     TokenizerFile::hf_tokenizer_json, hf_tokenizer_open, hf_tokenizer_detect},
};

// What a run, `data prepare` and a checkpoint without a tokenizer record use.
inline constexpr std::string_view kDefaultTokenizerType = "ByteTokenizer";

static_assert(
    [] {
      bool has_default = false;
      for (size_t i = 0; i < std::size(kTokenizerTypes); ++i) {
        has_default = has_default || kTokenizerTypes[i].name == kDefaultTokenizerType;
        for (size_t j = 0; j < i; ++j)
          if (kTokenizerTypes[i].name == kTokenizerTypes[j].name) return false;
      }
      return has_default;
    }(),
    "every tokenizer type has its own name, and the default is one of them");

// The row of `name`; nullptr when no row has it.
const TokenizerType* tokenizer_type_find(std::string_view name);

// The rows as help text, made at compile time: a reader of the text alone (options' help, which
// the planner-only Python module links) does not link the tokenizers and their libraries.
enum class TokenizerTypesText {
  names,       // "ByteTokenizer | SentencePieceTokenizer | …"
  with_help,   // "ByteTokenizer (bytes 0..255, …) | …"
  model_file,  // what --tokenizer-model names for each type that reads a file
};

namespace tokenizer_types_detail {

constexpr std::string_view model_file_help(TokenizerFile file) {
  switch (file) {
    case TokenizerFile::sentencepiece_model:
      return "the SentencePiece FILE.model";
    case TokenizerFile::hf_tokenizer_json:
      return "a folder with tokenizer.json and tokenizer_config.json, or the tokenizer.json";
    case TokenizerFile::none:
      break;
  }
  return "";
}

// Writes the text to `out` (nullptr: only counts) and returns its length.
constexpr size_t text_write(TokenizerTypesText what, char* out) {
  size_t n = 0;
  const auto put = [&](std::string_view s) {
    for (const char c : s) {
      if (out != nullptr) out[n] = c;
      ++n;
    }
  };
  bool first = true;
  for (const TokenizerType& t : kTokenizerTypes) {
    if (what == TokenizerTypesText::model_file && t.file == TokenizerFile::none) continue;
    if (!first) put(what == TokenizerTypesText::model_file ? "; " : " | ");
    first = false;
    put(t.name);
    if (what == TokenizerTypesText::with_help) {
      put(" (");
      put(t.help);
      put(")");
    } else if (what == TokenizerTypesText::model_file) {
      put(": ");
      put(model_file_help(t.file));
    }
  }
  return n;
}

template <TokenizerTypesText kWhat>
inline constexpr auto kText = [] {
  std::array<char, text_write(kWhat, nullptr)> text{};
  text_write(kWhat, text.data());
  return text;
}();

}  // namespace tokenizer_types_detail

template <TokenizerTypesText kWhat>
constexpr std::string_view tokenizer_types_text() {
  const auto& text = tokenizer_types_detail::kText<kWhat>;
  return {text.data(), text.size()};
}

}  // namespace infinipipe::tokenize
