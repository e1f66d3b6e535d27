#include <fmt/format.h>

#include "tokenize/hf_json.h"
#include "tokenize/hf_pipeline.h"

namespace infinipipe::tokenize {

using Json = nlohmann::json;

namespace {

// The byte of a "<0xXX>" token, or -1.
int fallback_byte(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// Replaces every occurrence of the one-character `from` in `s` by `to`.
std::string replace_char(const std::string& s, const std::string& from, const char* to) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, from.size(), from) == 0) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

}  // namespace

HfDecoder::HfDecoder(const Json& j, const std::string& where) {
  if (j.is_null()) {
    none_ = true;
  } else {
    add(j, where, 0);
  }
}

void HfDecoder::add(const Json& j, const std::string& where, int depth) {
  if (depth > kHfMaxComponentDepth) fail_config("{}: Sequences nest too deep", where);
  const std::string& type = hf_type(j, where);
  Step s{};
  if (type == "Sequence") {
    const Json& list = hf_field(j, "decoders", where);
    if (!list.is_array()) fail_config("{}.decoders: not an array", where);
    for (size_t i = 0; i < list.size(); i++) {
      add(list[i], fmt::format("{}.decoders[{}]", where, i), depth + 1);
    }
    return;
  } else if (type == "ByteLevel") {
    s.kind = Step::byte_level;
  } else if (type == "ByteFallback") {
    s.kind = Step::byte_fallback;
  } else if (type == "Fuse") {
    s.kind = Step::fuse;
  } else if (type == "Strip") {
    s.kind = Step::strip;
    s.text = hf_char(j, "content", where);
    s.start = int(json_int(hf_field(j, "start", where), where + ".start", 0, 1 << 20));
    s.stop = int(json_int(hf_field(j, "stop", where), where + ".stop", 0, 1 << 20));
  } else if (type == "Metaspace") {
    s.kind = Step::metaspace;
    s.text = hf_char(j, "replacement", where);
    s.prepend = hf_bool_or(j, "add_prefix_space", where, true);
    if (const auto p = j.find("prepend_scheme"); p != j.end() && !p->is_null()) {
      s.prepend = json_string(*p, where + ".prepend_scheme") != "never";
    }
  } else if (type == "Replace") {
    s.kind = Step::replace;
    s.text = hf_string(j, "content", where);
    s.pattern = hf_pattern(j, where);
  } else {
    hf_unsupported("decoder", type, where,
                   "ByteLevel, ByteFallback, Fuse, Strip, Metaspace, Replace, Sequence");
  }
  steps_.push_back(std::move(s));
}

std::string HfDecoder::apply(std::vector<HfDecodeToken> tokens) const {
  if (none_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); i++) out += (i ? " " : "") + tokens[i].text;
    return out;
  }
  std::vector<HfDecodeToken> next;
  for (const Step& s : steps_) {
    next.clear();
    switch (s.kind) {
      case Step::byte_level: {
        std::string run;
        bool in_run = false;
        auto flush = [&] {
          if (in_run) next.push_back({utf8_sanitize(byte_level_decode(run)), false});
          run.clear();
          in_run = false;
        };
        for (const HfDecodeToken& t : tokens) {
          if (t.added) {
            flush();
            next.push_back(t);
          } else {
            run += t.text;
            in_run = true;
          }
        }
        flush();
        break;
      }
      case Step::byte_fallback: {
        std::string bytes;
        size_t count = 0;
        auto flush = [&] {
          if (count == 0) return;
          // Valid UTF-8 as it is; otherwise one U+FFFD per byte, as Hugging Face does.
          if (utf8_sanitize(bytes) == bytes) {
            next.push_back({bytes, false});
          } else {
            std::string bad;
            for (size_t i = 0; i < count; i++) bad += "\xEF\xBF\xBD";
            next.push_back({bad, false});
          }
          bytes.clear();
          count = 0;
        };
        for (HfDecodeToken& t : tokens) {
          const int b = t.added ? -1 : fallback_byte(t.text);
          if (b >= 0) {
            bytes += char(b);
            count++;
          } else {
            flush();
            next.push_back(std::move(t));
          }
        }
        flush();
        break;
      }
      case Step::fuse: {
        std::string all;
        for (const HfDecodeToken& t : tokens) all += t.text;
        next.push_back({std::move(all), false});
        break;
      }
      case Step::strip:
        for (HfDecodeToken& t : tokens) {
          std::string& x = t.text;
          size_t b = 0, e = x.size();
          for (int i = 0; i < s.start && x.compare(b, s.text.size(), s.text) == 0; i++) {
            b += s.text.size();
          }
          for (int i = 0; i < s.stop && e >= b + s.text.size() &&
                          x.compare(e - s.text.size(), s.text.size(), s.text) == 0;
               i++) {
            e -= s.text.size();
          }
          next.push_back({x.substr(b, e - b), t.added});
        }
        break;
      case Step::metaspace:
        for (size_t i = 0; i < tokens.size(); i++) {
          std::string x = replace_char(tokens[i].text, s.text, " ");
          if (i == 0 && s.prepend && !x.empty() && x[0] == ' ') x.erase(0, 1);
          next.push_back({std::move(x), tokens[i].added});
        }
        break;
      case Step::replace:
        for (HfDecodeToken& t : tokens) {
          next.push_back({s.pattern->replace_all(t.text, s.text), t.added});
        }
        break;
    }
    tokens.swap(next);
  }
  std::string out;
  for (const HfDecodeToken& t : tokens) out += t.text;
  return out;
}

}  // namespace infinipipe::tokenize
