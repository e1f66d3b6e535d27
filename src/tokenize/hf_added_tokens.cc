#include "tokenize/hf_added_tokens.h"

#include <unicode/uchar.h>

#include <algorithm>

#include "tokenize/hf_text.h"

namespace infinipipe::tokenize {

namespace {

// Rust's char::is_whitespace (the White_Space property).
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Rust's char::is_alphanumeric or '_': what single_word tokens must not touch.
bool is_word(char32_t c) {
  return c == '_' || u_hasBinaryProperty(UChar32(c), UCHAR_ALPHABETIC) ||
         (U_GET_GC_MASK(UChar32(c)) & U_GC_N_MASK) != 0;
}

size_t char_start_before(std::string_view t, size_t i) {
  do {
    i--;
  } while (i > 0 && (static_cast<unsigned char>(t[i]) & 0xC0) == 0x80);
  return i;
}

}  // namespace

HfAddedMatcher::HfAddedMatcher(std::vector<const HfAddedToken*> tokens)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); i++) {
    by_first_byte_[static_cast<unsigned char>(tokens_[i]->content[0])].push_back(int(i));
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](int a, int b) {
      return tokens_[a]->content.size() > tokens_[b]->content.size();
    });
  }
}

void HfAddedMatcher::split(std::string_view text, std::vector<HfSegment>& out) const {
  size_t start = 0;  // of the text not yet emitted
  size_t i = 0;
  while (i < text.size()) {
    const HfAddedToken* hit = nullptr;
    for (const int k : by_first_byte_[static_cast<unsigned char>(text[i])]) {
      const HfAddedToken* t = tokens_[k];
      if (text.compare(i, t->content.size(), t->content) != 0) continue;
      if (t->single_word) {
        const size_t e = i + t->content.size();
        const bool before =
            i > 0 && is_word(utf8_decode_char(text.substr(char_start_before(text, i))));
        const bool after = e < text.size() && is_word(utf8_decode_char(text.substr(e)));
        if (before || after) continue;
      }
      hit = t;
      break;
    }
    if (hit == nullptr) {
      i += utf8_char_len(static_cast<unsigned char>(text[i]));
      continue;
    }
    size_t b = i, e = i + hit->content.size();
    if (hit->lstrip) {
      while (b > start) {
        const size_t p = char_start_before(text, b);
        if (!is_space(utf8_decode_char(text.substr(p)))) break;
        b = p;
      }
    }
    if (hit->rstrip) {
      while (e < text.size() && is_space(utf8_decode_char(text.substr(e)))) {
        e += utf8_char_len(static_cast<unsigned char>(text[e]));
      }
    }
    if (b > start) out.push_back({text.substr(start, b - start), -1});
    out.push_back({text.substr(b, e - b), hit->id});
    start = i = e;
  }
  if (start < text.size()) out.push_back({text.substr(start), -1});
}

}  // namespace infinipipe::tokenize
