#include <fmt/format.h>

#include "tokenize/hf_json.h"
#include "tokenize/hf_pipeline.h"

namespace infinipipe::tokenize {

using Json = nlohmann::json;

namespace {

// GPT-2's split, which ByteLevel applies when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

HfPreTokenizer::HfPreTokenizer(const Json& j, const std::string& where) {
  if (!j.is_null()) add(j, where, 0);
}

void HfPreTokenizer::add(const Json& j, const std::string& where, int depth) {
  if (depth > kHfMaxComponentDepth) fail_config("{}: Sequences nest too deep", where);
  const std::string& type = hf_type(j, where);
  Step s{};
  if (type == "Sequence") {
    const Json& list = hf_field(j, "pretokenizers", where);
    if (!list.is_array()) fail_config("{}.pretokenizers: not an array", where);
    for (size_t i = 0; i < list.size(); i++) {
      add(list[i], fmt::format("{}.pretokenizers[{}]", where, i), depth + 1);
    }
    return;
  } else if (type == "ByteLevel") {
    s.kind = Step::byte_level;
    s.flag = hf_bool_or(j, "add_prefix_space", where, true);
    if (hf_bool_or(j, "use_regex", where, true)) {
      s.pattern = std::make_shared<HfRegex>(kGpt2Pattern, false, where);
    }
  } else if (type == "Split") {
    s.kind = Step::split;
    s.pattern = hf_pattern(j, where);
    s.flag = hf_bool_or(j, "invert", where, false);
    const std::string& b = hf_string(j, "behavior", where);
    if (b == "Removed") {
      s.behavior = Behavior::removed;
    } else if (b == "Isolated") {
      s.behavior = Behavior::isolated;
    } else if (b == "MergedWithPrevious") {
      s.behavior = Behavior::merged_with_previous;
    } else if (b == "MergedWithNext") {
      s.behavior = Behavior::merged_with_next;
    } else if (b == "Contiguous") {
      s.behavior = Behavior::contiguous;
    } else {
      fail_config(
          "{}.behavior: {} is not one of Removed, Isolated, MergedWithPrevious, "
          "MergedWithNext, Contiguous",
          where, json_brief(b));
    }
  } else if (type == "Metaspace") {
    s.kind = Step::metaspace;
    s.replacement = hf_char(j, "replacement", where);
    s.pattern = std::make_shared<HfRegex>(s.replacement, true, where);
    s.behavior = Behavior::merged_with_next;
    s.split_on_replacement = hf_bool_or(j, "split", where, true);
    s.prepend = hf_bool_or(j, "add_prefix_space", where, true) ? Step::Prepend::always
                                                               : Step::Prepend::never;
    if (const auto p = j.find("prepend_scheme"); p != j.end() && !p->is_null()) {
      const std::string& scheme = json_string(*p, where + ".prepend_scheme");
      if (scheme == "always") {
        s.prepend = Step::Prepend::always;
      } else if (scheme == "first") {
        s.prepend = Step::Prepend::first;
      } else if (scheme == "never") {
        s.prepend = Step::Prepend::never;
      } else {
        fail_config("{}.prepend_scheme: {} is not always, first or never", where,
                    json_brief(scheme));
      }
    }
  } else if (type == "Digits") {
    s.kind = Step::digits;
    s.pattern = std::make_shared<HfRegex>(
        hf_bool_or(j, "individual_digits", where, false) ? R"(\p{N})" : R"(\p{N}+)", false, where);
  } else {
    hf_unsupported("pre-tokenizer", type, where, "ByteLevel, Split, Metaspace, Digits, Sequence");
  }
  steps_.push_back(std::move(s));
}

// Rust tokenizers' split of one piece by a pattern and a behaviour; empty pieces are dropped.
void HfPreTokenizer::split(const Step& s, const HfPiece& piece, std::vector<HfPiece>& out) {
  const std::string& t = piece.text;
  struct Span {
    size_t b, e;
    bool match;
  };
  std::vector<Span> spans;
  size_t prev = 0;
  for (const auto& [b, e] : s.pattern->find_all(t)) {
    if (b != prev) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != t.size()) spans.push_back({prev, t.size(), false});
  if (s.kind == Step::split && s.flag) {
    for (Span& x : spans) x.match = !x.match;
  }
  std::vector<Span> merged;
  switch (s.behavior) {
    case Behavior::removed:
      for (const Span& x : spans) {
        if (!x.match) merged.push_back(x);
      }
      break;
    case Behavior::isolated:
      merged = spans;
      break;
    case Behavior::merged_with_previous: {
      bool previous_match = false;
      for (const Span& x : spans) {
        if (x.match && !previous_match && !merged.empty()) {
          merged.back().e = x.e;
        } else {
          merged.push_back(x);
        }
        previous_match = x.match;
      }
      break;
    }
    case Behavior::merged_with_next: {
      bool previous_match = false;
      for (size_t i = spans.size(); i-- > 0;) {
        const Span& x = spans[i];
        if (x.match && !previous_match && !merged.empty()) {
          merged.back().b = x.b;
        } else {
          merged.push_back(x);
        }
        previous_match = x.match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
    case Behavior::contiguous: {
      bool previous_match = false;
      for (const Span& x : spans) {
        if (x.match == previous_match && !merged.empty()) {
          merged.back().e = x.e;
        } else {
          merged.push_back(x);
        }
        previous_match = x.match;
      }
      break;
    }
  }
  for (const Span& x : merged) {
    if (x.e > x.b) out.push_back({t.substr(x.b, x.e - x.b), piece.at_start && x.b == 0});
  }
}

void HfPreTokenizer::apply(std::vector<HfPiece>& pieces) const {
  std::vector<HfPiece> out;
  for (const Step& s : steps_) {
    out.clear();
    for (HfPiece& p : pieces) {
      switch (s.kind) {
        case Step::byte_level: {
          if (s.flag && (p.text.empty() || p.text[0] != ' ')) p.text.insert(p.text.begin(), ' ');
          const size_t first = out.size();
          if (s.pattern) {
            split(s, p, out);
          } else if (!p.text.empty()) {
            out.push_back(std::move(p));
          }
          for (size_t i = first; i < out.size(); i++) out[i].text = byte_level_encode(out[i].text);
          break;
        }
        case Step::split:
        case Step::digits:
          split(s, p, out);
          break;
        case Step::metaspace: {
          std::string text;
          text.reserve(p.text.size() + 3);
          for (const char c : p.text) {
            if (c == ' ') {
              text += s.replacement;
            } else {
              text += c;
            }
          }
          const bool starts = text.compare(0, s.replacement.size(), s.replacement) == 0;
          if (!starts && (s.prepend == Step::Prepend::always ||
                          (s.prepend == Step::Prepend::first && p.at_start))) {
            text.insert(0, s.replacement);
          }
          HfPiece q{std::move(text), p.at_start};
          if (s.split_on_replacement) {
            split(s, q, out);
          } else if (!q.text.empty()) {
            out.push_back(std::move(q));
          }
          break;
        }
      }
    }
    pieces.swap(out);
  }
}

}  // namespace infinipipe::tokenize
