// Small readers of tokenizer.json's component objects, each error naming the field.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "tokenize/hf_regex.h"

namespace infinipipe::tokenize {

// Sequences nest; real files nest one level. Deeper is refused before recursion gets far.
inline constexpr int kHfMaxComponentDepth = 8;

// The "type" of a component object.
inline const std::string& hf_type(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) fail_config("{}: not an object", where);
  const auto t = j.find("type");
  if (t == j.end()) fail_config("{}: no \"type\"", where);
  return json_string(*t, where + ".type");
}

inline const nlohmann::json& hf_field(const nlohmann::json& j, const char* key,
                                      const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) fail_config("{}: no \"{}\"", where, key);
  return *it;
}

inline const std::string& hf_string(const nlohmann::json& j, const char* key,
                                    const std::string& where) {
  return json_string(hf_field(j, key, where), where + "." + key);
}

inline bool hf_bool_or(const nlohmann::json& j, const char* key, const std::string& where,
                       bool fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return json_bool(*it, where + "." + key);
}

// {"String": "..."} (matched literally) or {"Regex": "..."}.
inline std::shared_ptr<HfRegex> hf_pattern(const nlohmann::json& j, const std::string& where) {
  const nlohmann::json& p = hf_field(j, "pattern", where);
  if (p.is_object() && p.size() == 1 && p.contains("String")) {
    return std::make_shared<HfRegex>(json_string(p["String"], where + ".pattern.String"), true,
                                     where + ".pattern");
  }
  if (p.is_object() && p.size() == 1 && p.contains("Regex")) {
    return std::make_shared<HfRegex>(json_string(p["Regex"], where + ".pattern.Regex"), false,
                                     where + ".pattern");
  }
  fail_config("{}.pattern: {} is neither {{\"String\": ...}} nor {{\"Regex\": ...}}", where,
              json_brief(p));
}

// The one character of a Metaspace replacement or a Strip content.
inline std::string hf_char(const nlohmann::json& j, const char* key, const std::string& where) {
  const std::string& s = hf_string(j, key, where);
  const bool one =
      !s.empty() && s.size() <= 4 &&
      (s.size() == 1 ||
       (static_cast<unsigned char>(s[0]) >= 0xC0 &&
        ((s.size() == 2 && (unsigned char)s[0] < 0xE0) ||
         (s.size() == 3 && (unsigned char)s[0] < 0xF0 && (unsigned char)s[0] >= 0xE0) ||
         (s.size() == 4 && (unsigned char)s[0] >= 0xF0))));
  if (!one) fail_config("{}.{}: {} is not one character", where, key, json_brief(s));
  return s;
}

[[noreturn]] inline void hf_unsupported(const char* stage, const std::string& type,
                                        const std::string& where, const char* supported) {
  fail_config(
      "{}: the {} type {} is not supported by infinipipe's tokenizer.json reader (supported: "
      "{}); tokenizing without it would give different tokens",
      where, stage, json_brief(type), supported);
}

}  // namespace infinipipe::tokenize
