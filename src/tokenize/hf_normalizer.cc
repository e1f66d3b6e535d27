#include <fmt/format.h>

#include "tokenize/hf_json.h"
#include "tokenize/hf_pipeline.h"

namespace infinipipe::tokenize {

using Json = nlohmann::json;

HfNormalizer::HfNormalizer(const Json& j, const std::string& where) {
  if (!j.is_null()) add(j, where, 0);
}

void HfNormalizer::add(const Json& j, const std::string& where, int depth) {
  if (depth > kHfMaxComponentDepth) fail_config("{}: Sequences nest too deep", where);
  const std::string& type = hf_type(j, where);
  if (type == "Sequence") {
    const Json& list = hf_field(j, "normalizers", where);
    if (!list.is_array()) fail_config("{}.normalizers: not an array", where);
    for (size_t i = 0; i < list.size(); i++) {
      add(list[i], fmt::format("{}.normalizers[{}]", where, i), depth + 1);
    }
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    const UnicodeForm form = type == "NFC"    ? UnicodeForm::NFC
                             : type == "NFD"  ? UnicodeForm::NFD
                             : type == "NFKC" ? UnicodeForm::NFKC
                                              : UnicodeForm::NFKD;
    steps_.push_back({Step::unicode, form, "", nullptr});
  } else if (type == "Prepend") {
    steps_.push_back({Step::prepend, UnicodeForm::NFC, hf_string(j, "prepend", where), nullptr});
  } else if (type == "Replace") {
    steps_.push_back(
        {Step::replace, UnicodeForm::NFC, hf_string(j, "content", where), hf_pattern(j, where)});
  } else {
    hf_unsupported("normalizer", type, where, "NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence");
  }
}

std::string HfNormalizer::apply(std::string text) const {
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Step::unicode:
        text = unicode_normalize(text, s.form);
        break;
      case Step::prepend:
        if (!text.empty()) text.insert(0, s.text);
        break;
      case Step::replace:
        text = s.pattern->replace_all(text, s.text);
        break;
    }
  }
  return text;
}

}  // namespace infinipipe::tokenize
