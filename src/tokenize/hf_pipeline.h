// The text stages of tokenizer.json around the BPE model: normalizer, pre-tokenizer and decoder,
// each a flat list of steps (a "Sequence" is unrolled). Component types infinipipe does not
// implement are refused by name when the file is read, never skipped.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenize/hf_regex.h"
#include "tokenize/hf_text.h"

namespace infinipipe::tokenize {

// NFC NFD NFKC NFKD Prepend Replace Sequence.
class HfNormalizer {
 public:
  HfNormalizer(const nlohmann::json& j, const std::string& where);  // null: none
  std::string apply(std::string text) const;
  bool empty() const { return steps_.empty(); }

 private:
  struct Step {
    enum Kind { unicode, prepend, replace } kind;
    UnicodeForm form = UnicodeForm::NFC;
    std::string text;  // prepend: the prefix; replace: the replacement
    std::shared_ptr<HfRegex> pattern;
  };
  void add(const nlohmann::json& j, const std::string& where, int depth);
  std::vector<Step> steps_;
};

// A piece of pre-tokenized text; `at_start`: it begins at the start of the whole input
// (Metaspace's prepend_scheme "first").
struct HfPiece {
  std::string text;
  bool at_start;
};

// ByteLevel Split Metaspace Digits Sequence.
class HfPreTokenizer {
 public:
  HfPreTokenizer(const nlohmann::json& j, const std::string& where);  // null: none
  void apply(std::vector<HfPiece>& pieces) const;

 private:
  enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
  struct Step {
    enum Kind { byte_level, split, metaspace, digits } kind;
    std::shared_ptr<HfRegex> pattern;  // byte_level (with use_regex), split, digits
    bool flag = false;                 // byte_level: add_prefix_space; split: invert
    Behavior behavior = Behavior::isolated;
    std::string replacement;  // metaspace
    enum class Prepend { always, first, never } prepend = Prepend::always;
    bool split_on_replacement = true;
  };
  void add(const nlohmann::json& j, const std::string& where, int depth);
  static void split(const Step& s, const HfPiece& piece, std::vector<HfPiece>& out);
  std::vector<Step> steps_;
};

// A token on its way to text; `added`: an added token's content, which ByteLevel leaves as it
// is (transformers decodes the byte-level runs between added tokens separately).
struct HfDecodeToken {
  std::string text;
  bool added;
};

// ByteLevel ByteFallback Fuse Strip Metaspace Replace Sequence.
class HfDecoder {
 public:
  HfDecoder(const nlohmann::json& j, const std::string& where);  // null: joined with spaces
  std::string apply(std::vector<HfDecodeToken> tokens) const;

 private:
  struct Step {
    enum Kind { byte_level, byte_fallback, fuse, strip, metaspace, replace } kind;
    std::string text;  // strip: the character; metaspace: the replacement; replace: content
    int start = 0, stop = 0;
    bool prepend = true;
    std::shared_ptr<HfRegex> pattern;
  };
  void add(const nlohmann::json& j, const std::string& where, int depth);
  std::vector<Step> steps_;
  bool none_ = false;
};

}  // namespace infinipipe::tokenize
