// The added tokens of tokenizer.json ("added_tokens"): matched in the text before the model
// sees it, longest first at the leftmost place, with lstrip/rstrip/single_word as Hugging Face
// defines them; `normalized` ones are matched in the normalized text.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace infinipipe::tokenize {

struct HfAddedToken {
  std::string content;
  int32_t id;
  bool lstrip, rstrip, single_word, normalized, special;
};

// A part of a text: an added token (id >= 0) or text for the model (id -1).
struct HfSegment {
  std::string_view text;
  int32_t id;
};

class HfAddedMatcher {
 public:
  explicit HfAddedMatcher(std::vector<const HfAddedToken*> tokens);
  bool empty() const { return tokens_.empty(); }
  void split(std::string_view text, std::vector<HfSegment>& out) const;

 private:
  std::vector<const HfAddedToken*> tokens_;
  std::array<std::vector<int>, 256> by_first_byte_;  // longest first
};

}  // namespace infinipipe::tokenize
