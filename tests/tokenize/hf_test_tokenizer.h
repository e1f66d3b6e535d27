// Small tokenizer.json files for tests: a GPT-2/Llama 3 style byte-level BPE and a Llama 2 /
// Mistral style BPE with byte fallback, each a few hundred tokens, built here (no downloads).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tokenize/hf_text.h"

namespace infinipipe::tokenize::test {

inline constexpr const char* kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Byte-level BPE: the 256 byte tokens (id = byte), merges spelling "he" 256 "Ġt" 257 "Ġthe" 258
// "pi" 259 "pip" 260 "pipe" 261 "Ġpipe" 262 "12" 263, "xyz" 264 that no merge reaches, and the
// special tokens <|begin_of_text|> (bos, 300) and <|end_of_text|> (eos, 301).
inline nlohmann::json hf_byte_level_json(bool pair_merges = false) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; b++) vocab[byte_level_char(uint8_t(b))] = b;
  const char* merges[][2] = {{"h", "e"},  {"Ġ", "t"},   {"Ġt", "he"},  {"p", "i"},
                             {"pi", "p"}, {"pip", "e"}, {"Ġ", "pipe"}, {"1", "2"}};
  nlohmann::json m = nlohmann::json::array();
  int id = 256;
  for (const auto& mg : merges) {
    vocab[std::string(mg[0]) + mg[1]] = id++;
    if (pair_merges) {
      m.push_back({mg[0], mg[1]});
    } else {
      m.push_back(std::string(mg[0]) + " " + mg[1]);
    }
  }
  vocab["xyz"] = 264;
  auto added = [](const char* content, int i) {
    return nlohmann::json{{"id", i},         {"content", content}, {"single_word", false},
                          {"lstrip", false}, {"rstrip", false},    {"normalized", false},
                          {"special", true}};
  };
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", {added("<|begin_of_text|>", 300), added("<|end_of_text|>", 301)}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", kLlama3Split}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"},
           {"add_prefix_space", false},
           {"trim_offsets", true},
           {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", nlohmann::json::array()},
        {"special_tokens",
         {{"<|begin_of_text|>",
           {{"id", "<|begin_of_text|>"}, {"ids", {300}}, {"tokens", {"<|begin_of_text|>"}}}}}}}},
      {"decoder",
       {{"type", "ByteLevel"},
        {"add_prefix_space", true},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", true},
        {"vocab", vocab},
        {"merges", m}}}};
}

inline std::string hf_byte_level_config() {
  return R"({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
             "tokenizer_class": "PreTrainedTokenizerFast"})";
}

// Llama 2 / Mistral style: <unk> <s> </s>, the 256 <0xXX> byte tokens, then pieces with "▁";
// normalizer Prepend("▁") + Replace(" ", "▁"), decoder Replace + ByteFallback + Fuse + Strip.
inline nlohmann::json hf_byte_fallback_json() {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  char name[8];
  for (int b = 0; b < 256; b++) {
    snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  int id = 259;
  for (const char* t : {"▁", "a", "b", "c", "▁a", "ab", "▁ab", "é"}) vocab[t] = id++;
  auto added = [](const char* content, int i) {
    return nlohmann::json{{"id", i},         {"content", content}, {"single_word", false},
                          {"lstrip", false}, {"rstrip", false},    {"normalized", false},
                          {"special", true}};
  };
  return {{"version", "1.0"},
          {"added_tokens", {added("<unk>", 0), added("<s>", 1), added("</s>", 2)}},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", "▁"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder",
           {{"type", "Sequence"},
            {"decoders",
             {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
              {{"type", "ByteFallback"}},
              {{"type", "Fuse"}},
              {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
          {"model",
           {{"type", "BPE"},
            {"unk_token", "<unk>"},
            {"fuse_unk", true},
            {"byte_fallback", true},
            {"vocab", vocab},
            {"merges", {"▁ a", "a b", "▁a b"}}}}};
}

inline std::string hf_byte_fallback_config() {
  return R"({"bos_token": "<s>", "eos_token": "</s>", "tokenizer_class": "LlamaTokenizerFast",
             "add_bos_token": true, "add_eos_token": false})";
}

}  // namespace infinipipe::tokenize::test
