// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): vocabulary, ranked merges
// (as "a b" strings or ["a", "b"] pairs), byte_fallback, ignore_merges, unk_token, fuse_unk.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace infinipipe::tokenize {

// Lookups of std::string keys by string_view without a copy.
struct HfStringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using HfVocab = std::unordered_map<std::string, int32_t, HfStringHash, std::equal_to<>>;

// Ids above this are refused: no real vocabulary comes near it, and the id -> token table and
// a model's embedding are sized by the largest id.
inline constexpr int64_t kHfMaxTokenId = (1 << 24) - 1;

class HfBpe {
 public:
  // ConfigError naming the field (`where` is "FILE: model") for anything out of bounds or
  // unsupported (dropout, continuing_subword_prefix, end_of_word_suffix).
  HfBpe(const nlohmann::json& model, const std::string& where);

  // Appends the ids of one pre-tokenized piece. Error for a character with no token when the
  // model has neither byte_fallback bytes nor an unk_token for it.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

  int32_t id_of(std::string_view token) const;  // -1: not in the vocabulary
  const HfVocab& vocab() const { return vocab_; }
  int64_t max_id() const { return max_id_; }

 private:
  struct Merge {
    int32_t rank, merged;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }
  void symbols_of(std::string_view piece, std::vector<int32_t>& ids) const;

  HfVocab vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  int64_t max_id_ = -1;
  int32_t unk_ = -1;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256];  // <0xXX> tokens of byte_fallback (-1: absent)
};

}  // namespace infinipipe::tokenize
