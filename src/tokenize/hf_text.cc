#include "tokenize/hf_text.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <array>

#include "core/error.h"

namespace infinipipe::tokenize {

namespace {

// The byte length of the longest well-formed prefix of a UTF-8 sequence at s (0: none), and
// whether it is complete. Follows Table 3-7 of the Unicode standard.
size_t utf8_valid_prefix(std::string_view s, bool& complete) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  complete = true;
  if (c < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    complete = false;
    return 0;
  }
  size_t i = 1;
  for (; i <= need; i++) {
    if (i >= s.size() || b(i) < lo || b(i) > hi) {
      complete = false;
      return i;  // the lead byte and the continuation bytes so far: one maximal subpart
    }
    lo = 0x80;
    hi = 0xBF;
  }
  return i;
}

std::array<std::string, 256> byte_level_table() {
  std::array<std::string, 256> t;
  int next = 256;
  for (int b = 0; b < 256; b++) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    utf8_append(t[b], printable ? char32_t(b) : char32_t(next++));
  }
  return t;
}

const std::array<std::string, 256>& table() {
  static const std::array<std::string, 256> t = byte_level_table();
  return t;
}

}  // namespace

std::string utf8_sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    bool complete;
    const size_t n = utf8_valid_prefix(text.substr(i), complete);
    if (complete) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += n == 0 ? 1 : n;
    }
  }
  return out;
}

char32_t utf8_decode_char(std::string_view s) {
  const auto b = [&](size_t i) { return char32_t(static_cast<unsigned char>(s[i])); };
  switch (utf8_char_len(static_cast<unsigned char>(s[0]))) {
    case 1:
      return b(0);
    case 2:
      return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3:
      return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default:
      return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

const std::string& byte_level_char(uint8_t b) {
  return table()[b];
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += table()[static_cast<unsigned char>(c)];
  return out;
}

std::string byte_level_decode(std::string_view text) {
  // Code point -> byte for the alphabet (all below U+0144).
  static const std::array<int, 512> inverse = [] {
    std::array<int, 512> inv;
    inv.fill(-1);
    for (int b = 0; b < 256; b++) inv[utf8_decode_char(table()[b])] = b;
    return inv;
  }();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::min(utf8_char_len(static_cast<unsigned char>(text[i])), text.size() - i);
    const char32_t cp = n == 1 ? char32_t(static_cast<unsigned char>(text[i]))
                               : utf8_decode_char(text.substr(i, n));
    if (cp < inverse.size() && inverse[cp] >= 0) {
      out += char(inverse[cp]);
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string unicode_normalize(std::string_view text, UnicodeForm form) {
  // ASCII is the same text in all four forms.
  bool ascii = true;
  for (const char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case UnicodeForm::NFC:
      n = icu::Normalizer2::getNFCInstance(status);
      break;
    case UnicodeForm::NFD:
      n = icu::Normalizer2::getNFDInstance(status);
      break;
    case UnicodeForm::NFKC:
      n = icu::Normalizer2::getNFKCInstance(status);
      break;
    case UnicodeForm::NFKD:
      n = icu::Normalizer2::getNFKDInstance(status);
      break;
  }
  if (U_FAILURE(status)) fail("ICU has no Unicode normalizer ({})", u_errorName(status));
  const icu::UnicodeString in =
      icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), int32_t(text.size())));
  const icu::UnicodeString normalized = n->normalize(in, status);
  if (U_FAILURE(status)) fail("ICU cannot normalize a text ({})", u_errorName(status));
  std::string out;
  normalized.toUTF8String(out);
  return out;
}

}  // namespace infinipipe::tokenize
