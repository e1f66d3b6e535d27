// HuggingFaceTokenizer's components on small tokenizer.json files whose ids can be worked out by
// hand (the Llama 3 file itself is compared with the reference in test_hf_tokenizer_reference):
// merges in both forms, ignore_merges, byte fallback with unk, added tokens and their flags,
// normalizers, each Split behaviour, Metaspace, Digits, the template and the decoders; then every
// unsupported component and hostile field refused with a message naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "common/error_text.h"
#include "core/error.h"
#include "hf_test_tokenizer.h"
#include "tokenize/hf_regex.h"
#include "tokenize/hf_tokenizer.h"

namespace infinipipe::tokenize {
namespace {

using Json = nlohmann::json;
using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> parse(const Json& j, const std::string& config) {
  return hf_tokenizer_parse(j.dump(), config, "test tokenizer.json");
}
std::unique_ptr<Tokenizer> byte_level(const Json& j) {
  return parse(j, test::hf_byte_level_config());
}
std::unique_ptr<Tokenizer> fallback(const Json& j,
                                    const std::string& config = test::hf_byte_fallback_config()) {
  return parse(j, config);
}

// The message of the error `f` throws (empty when it throws none).
TEST(HfTokenizer, ByteLevelBpeWithTemplateBos) {
  const auto t = byte_level(test::hf_byte_level_json());
  EXPECT_EQ(t->type(), "HuggingFaceTokenizer");
  EXPECT_EQ(t->vocab_size(), 302);
  EXPECT_EQ(t->bos(), 300);
  EXPECT_EQ(t->eos(), 301);
  EXPECT_EQ(t->eod(), 301);
  // "the" | " pipe" | " " | "12": "the" is t + he (no "the" token); " pipe" is one token.
  EXPECT_EQ(t->encode("the pipe 12"), (Ids{300, 116, 256, 262, 32, 263}));
  EXPECT_EQ(t->decode(t->encode("the pipe 12")), "<|begin_of_text|>the pipe 12");
  EXPECT_EQ(t->decode(Ids{116, 256, 262, 32, 263}), "the pipe 12");
  EXPECT_EQ(t->encode(""), (Ids{300}));
}

TEST(HfTokenizer, MergesAsPairsEqualMergesAsStrings) {
  const auto a = byte_level(test::hf_byte_level_json(false));
  const auto b = byte_level(test::hf_byte_level_json(true));
  for (const char* text : {"the pipe 12", " the\tpipes pipe", "pip pipe 1212"}) {
    EXPECT_EQ(a->encode(text), b->encode(text)) << text;
  }
}

TEST(HfTokenizer, IgnoreMergesTakesWholeVocabularyTokens) {
  Json j = test::hf_byte_level_json();
  EXPECT_EQ(byte_level(j)->encode("xyz"), (Ids{300, 264}));
  j["model"]["ignore_merges"] = false;
  EXPECT_EQ(byte_level(j)->encode("xyz"), (Ids{300, 'x', 'y', 'z'}));
}

TEST(HfTokenizer, SpecialTokensAreMatchedBeforeTheModel) {
  const auto t = byte_level(test::hf_byte_level_json());
  EXPECT_EQ(t->encode("a<|end_of_text|>b"), (Ids{300, 'a', 301, 'b'}));
  const Ids near_miss = t->encode("<|end_of_text|");
  EXPECT_EQ(std::count(near_miss.begin(), near_miss.end(), 301), 0);
  EXPECT_EQ(t->decode(near_miss), "<|begin_of_text|><|end_of_text|");
  EXPECT_EQ(t->decode(Ids{'a', 301, 'b'}), "a<|end_of_text|>b");
}

TEST(HfTokenizer, AddedTokenStripAndSingleWord) {
  Json j = test::hf_byte_level_json();
  j["added_tokens"].push_back({{"id", 302},
                               {"content", "<m>"},
                               {"lstrip", true},
                               {"rstrip", true},
                               {"single_word", false},
                               {"normalized", false},
                               {"special", true}});
  j["added_tokens"].push_back({{"id", 303},
                               {"content", "ab"},
                               {"lstrip", false},
                               {"rstrip", false},
                               {"single_word", true},
                               {"normalized", false},
                               {"special", false}});
  const auto t = byte_level(j);
  EXPECT_EQ(t->vocab_size(), 304);
  EXPECT_EQ(t->encode("a <m> b"), (Ids{300, 'a', 302, 'b'}));
  // "ab" alone is the token; inside "cab" it is not a word of its own.
  EXPECT_EQ(t->encode("ab cab"), (Ids{300, 303, 32, 'c', 'a', 'b'}));
  j["added_tokens"][2]["lstrip"] = false;
  j["added_tokens"][2]["rstrip"] = false;
  EXPECT_EQ(byte_level(j)->encode("a <m> b"), (Ids{300, 'a', 32, 302, 32, 'b'}));
}

TEST(HfTokenizer, LlamaClassConfigRebuildsTheTemplate) {
  const Json j = test::hf_byte_level_json();
  const auto t = parse(j, R"({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
    "tokenizer_class": "LlamaTokenizerFast", "add_bos_token": false, "add_eos_token": true})");
  EXPECT_EQ(t->encode("12"), (Ids{263, 301}));
  // Without a config: no bos/eos known, and documents need an eos.
  EXPECT_NE(infinipipe::testing::error_text([&] { parse(j, ""); }).find("names no eos_token"),
            std::string::npos);
  // A ByteLevel post-processor (as Meta's first Llama 3 file) adds nothing.
  Json k = j;
  k["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}};
  EXPECT_EQ(byte_level(k)->encode("12"), (Ids{263}));
}

TEST(HfTokenizer, DigitsPreTokenizer) {
  Json j = test::hf_byte_level_json();
  Json byte = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte}}};
  EXPECT_EQ(byte_level(j)->encode("12"), (Ids{300, '1', '2'}));
  j["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = false;
  EXPECT_EQ(byte_level(j)->encode("12"), (Ids{300, 263}));
}

TEST(HfTokenizer, ByteLevelPreTokenizerWithItsOwnRegexAndPrefixSpace) {
  Json j = test::hf_byte_level_json();
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  // " the" is one piece (GPT-2's split), so Ġ t h e merge to Ġthe.
  EXPECT_EQ(byte_level(j)->encode("the"), (Ids{300, 258}));
}

TEST(HfTokenizer, ByteFallbackBpeWithPrependReplaceNormalizer) {
  const auto t = fallback(test::hf_byte_fallback_json());
  EXPECT_EQ(t->vocab_size(), 267);
  EXPECT_EQ(t->bos(), 1);
  EXPECT_EQ(t->eos(), 2);
  EXPECT_EQ(t->encode("ab ab"), (Ids{1, 265, 265}));
  // "€" has no token: its three bytes.
  EXPECT_EQ(t->encode("c€"), (Ids{1, 259, 262, 3 + 0xE2, 3 + 0x82, 3 + 0xAC}));
  EXPECT_EQ(t->decode(Ids{259, 262, 3 + 0xE2, 3 + 0x82, 3 + 0xAC}), "c€");
  EXPECT_EQ(t->decode(Ids{265, 265}), "ab ab");
  // A lone byte that is not UTF-8 decodes to U+FFFD per byte.
  EXPECT_EQ(t->decode(Ids{3 + 0xE2, 3 + 0x82}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(t->encode("</s>"), (Ids{1, 2}));
}

TEST(HfTokenizer, UnknownCharactersFuseIntoOneUnk) {
  Json j = test::hf_byte_fallback_json();
  j["model"]["byte_fallback"] = false;
  EXPECT_EQ(fallback(j)->encode("€€"), (Ids{1, 259, 0}));
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(fallback(j)->encode("€€"), (Ids{1, 259, 0, 0}));
  j["model"]["unk_token"] = nullptr;
  EXPECT_NE(infinipipe::testing::error_text([&] {
              fallback(j)->encode("€");
            }).find("U+20AC has no token"),
            std::string::npos);
}

TEST(HfTokenizer, UnicodeNormalizers) {
  Json j = test::hf_byte_fallback_json();
  EXPECT_EQ(fallback(j)->encode("e\u0301"), (Ids{1, 259, 3 + 'e', 3 + 0xCC, 3 + 0x81}));
  j["normalizer"]["normalizers"].insert(j["normalizer"]["normalizers"].begin(),
                                        Json{{"type", "NFC"}});
  EXPECT_EQ(fallback(j)->encode("e\u0301"), (Ids{1, 259, 266}));
  j["normalizer"]["normalizers"][0]["type"] = "NFKC";
  EXPECT_EQ(fallback(j)->encode("\uFB01"), (Ids{1, 259, 3 + 'f', 3 + 'i'}));  // the ﬁ ligature
}

TEST(HfTokenizer, MetaspacePrependsOnlyAtTheStartWithSchemeFirst) {
  Json j = test::hf_byte_fallback_json();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}};
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}};
  EXPECT_EQ(fallback(j)->encode("ab ab"), (Ids{1, 265, 265}));
  EXPECT_EQ(fallback(j)->encode("<s>ab"), (Ids{1, 1, 264}));
  EXPECT_EQ(fallback(j)->decode(Ids{265, 265}), "ab ab");
  j["pre_tokenizer"]["prepend_scheme"] = "always";
  EXPECT_EQ(fallback(j)->encode("<s>ab"), (Ids{1, 1, 265}));
}

// a b - and the merges "a -", "- b", "- -": which pieces a Split leaves shows in the ids.
Json split_json(const char* behavior, bool invert = false) {
  return {{"added_tokens", Json::array()},
          {"pre_tokenizer",
           {{"type", "Split"},
            {"pattern", {{"String", "-"}}},
            {"behavior", behavior},
            {"invert", invert}}},
          {"model",
           {{"type", "BPE"},
            {"vocab", {{"a", 0}, {"b", 1}, {"-", 2}, {"a-", 3}, {"-b", 4}, {"--", 5}, {"</s>", 6}}},
            {"merges", {"a -", "- b", "- -"}}}}};
}

TEST(HfTokenizer, SplitBehaviours) {
  const std::string config = R"({"eos_token": "</s>"})";
  EXPECT_EQ(parse(split_json("Removed"), config)->encode("a-b"), (Ids{0, 1}));
  EXPECT_EQ(parse(split_json("Isolated"), config)->encode("a-b"), (Ids{0, 2, 1}));
  EXPECT_EQ(parse(split_json("MergedWithPrevious"), config)->encode("a-b"), (Ids{3, 1}));
  EXPECT_EQ(parse(split_json("MergedWithNext"), config)->encode("a-b"), (Ids{0, 4}));
  EXPECT_EQ(parse(split_json("Contiguous"), config)->encode("a--b"), (Ids{0, 5, 1}));
  EXPECT_EQ(parse(split_json("Isolated"), config)->encode("a--b"), (Ids{0, 2, 2, 1}));
  EXPECT_EQ(parse(split_json("Removed", true), config)->encode("a-b"), (Ids{2}));
  // No decoder: tokens joined with spaces, as Hugging Face does.
  EXPECT_EQ(parse(split_json("Isolated"), config)->decode(Ids{0, 2, 1}), "a - b");
}

// Unicode's White_Space, as PCRE2, Hugging Face's Rust tokenizers and tiktoken see \s:
// U+0085 is a space and U+FEFF is not (JavaScript's \s says the opposite for both).
TEST(HfTokenizer, RegexSpacesAreUnicodeWhiteSpace) {
  const HfRegex space(R"(\s)", false, "test");
  EXPECT_EQ(space.find_all("\u0085").size(), 1u);
  EXPECT_EQ(space.find_all("\uFEFF").size(), 0u);
  const HfRegex letters(R"(\p{L}+)", false, "test");
  EXPECT_EQ(letters.find_all("héllo wörld 中文"),
            (std::vector<std::pair<size_t, size_t>>{{0, 6}, {7, 13}, {14, 20}}));
}

TEST(HfTokenizer, UnsupportedComponentsAreRefusedByName) {
  struct Case {
    const char* field;
    Json value;
    const char* type;
  };
  const std::vector<Case> cases{
      {"normalizer", {{"type", "Lowercase"}}, "Lowercase"},
      {"pre_tokenizer", {{"type", "Whitespace"}}, "Whitespace"},
      {"decoder", {{"type", "CTC"}}, "CTC"},
      {"post_processor", {{"type", "RobertaProcessing"}}, "RobertaProcessing"},
  };
  for (const Case& c : cases) {
    Json j = test::hf_byte_level_json();
    j[c.field] = c.value;
    const std::string e = infinipipe::testing::error_text([&] { byte_level(j); });
    EXPECT_NE(e.find(c.type), std::string::npos) << e;
    EXPECT_NE(e.find("not supported"), std::string::npos) << e;
  }
  Json j = test::hf_byte_level_json();
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(infinipipe::testing::error_text([&] { byte_level(j); }).find("WordPiece"),
            std::string::npos);
  j = test::hf_byte_level_json();
  j["model"]["dropout"] = 0.1;
  EXPECT_NE(infinipipe::testing::error_text([&] { byte_level(j); }).find("dropout"),
            std::string::npos);
}

TEST(HfTokenizer, HostileFilesAreRefusedWithTheField) {
  auto refused = [](const std::function<void(Json&)>& damage, const char* says) {
    Json j = test::hf_byte_level_json();
    damage(j);
    const std::string e = infinipipe::testing::error_text([&] { byte_level(j); });
    EXPECT_NE(e.find(says), std::string::npos) << "message: " << e;
  };
  refused([](Json& j) { j["model"]["merges"].push_back("x \u00e9\u00e9"); },
          "missing from the vocabulary");
  refused([](Json& j) { j["model"]["merges"].push_back(7); }, "neither");
  refused([](Json& j) { j["model"]["merges"].push_back("a b c"); }, "two tokens");
  refused([](Json& j) { j["model"]["vocab"]["zz"] = int64_t(1) << 40; }, "vocab");
  refused([](Json& j) { j["model"]["vocab"]["zz"] = 5; }, "given to two tokens");
  refused([](Json& j) { j["model"]["vocab"]["zz"] = -1; }, "vocab");
  refused([](Json& j) { j["model"]["vocab"] = Json::array(); }, "vocab");
  refused([](Json& j) { j["added_tokens"][0]["id"] = int64_t(1) << 31; }, "added_tokens[0]");
  refused([](Json& j) { j["added_tokens"][0]["id"] = 5; }, "which is already");
  refused(
      [](Json& j) { j["post_processor"]["special_tokens"]["<|begin_of_text|>"]["ids"] = {999}; },
      "special_tokens");
  refused([](Json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(["; },
          "cannot be compiled");
  refused([](Json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; },
          "Sideways");
  refused(
      [](Json& j) {
        Json p = {{"type", "ByteLevel"}};
        for (int i = 0; i < 20; i++) p = {{"type", "Sequence"}, {"pretokenizers", {p}}};
        j["pre_tokenizer"] = p;
      },
      "nest too deep");
  refused([](Json& j) { j.erase("model"); }, "model");
  EXPECT_THROW(hf_tokenizer_parse("{\"model\": ", "", "x"), Error);
  EXPECT_THROW(hf_tokenizer_parse(std::string(200, '[') + std::string(200, ']'), "", "x"), Error);
  EXPECT_THROW(hf_tokenizer_parse("[]", "", "x"), Error);
}

}  // namespace
}  // namespace infinipipe::tokenize
