// Text helpers of the Hugging Face tokenizer (hf_tokenizer.h): UTF-8 handling, the byte-level
// alphabet of GPT-2 style tokenizers, and Unicode normalization through ICU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace infinipipe::tokenize {

// `text` with every ill-formed UTF-8 sequence replaced by U+FFFD, one per maximal subpart (the
// Unicode recommendation, and what Node's and browsers' TextDecoder do): the reference
// implementation sees text only after such a decode, so ours tokenizes the same characters.
std::string utf8_sanitize(std::string_view text);

// The length in bytes of the UTF-8 character starting at s[0] (valid UTF-8 assumed; 1 for a
// stray continuation byte so loops always advance).
inline size_t utf8_char_len(unsigned char c) {
  return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
}

// The code point of the (valid) UTF-8 character at s[0], and its UTF-8 encoding.
char32_t utf8_decode_char(std::string_view s);
void utf8_append(std::string& out, char32_t cp);

// GPT-2's byte-level alphabet: byte b shows as the character byte_level_char(b), so every byte
// sequence becomes printable text that BPE vocabularies spell ("Ġ" for a space).
const std::string& byte_level_char(uint8_t b);
std::string byte_level_encode(std::string_view bytes);
// The inverse; a character outside the alphabet keeps its own UTF-8 bytes.
std::string byte_level_decode(std::string_view text);

enum class UnicodeForm { NFC, NFD, NFKC, NFKD };
std::string unicode_normalize(std::string_view text, UnicodeForm form);

}  // namespace infinipipe::tokenize
