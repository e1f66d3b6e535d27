#include "tokenize/tokenizer_saved.h"

#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "tokenize/hf_tokenizer.h"
#include "tokenize/tokenizer_types.h"

namespace infinipipe::tokenize {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

// Whether the folder has `path`: false when nothing is there; otherwise it must pass the one
// reader of user files' checks for `kind` (a regular file within the bound, not a symbolic
// link), or it is a ConfigError naming it.
bool saved_file_exists(const fs::path& path, const InputKind& kind) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) return false;
  input_file_check(path.string(), kind, InputLinks::refuse);
  return true;
}

Json read_config(const fs::path& path) {
  if (!saved_file_exists(path, input_kind::kTokenizerConfig)) {
    fail_config(
        "{} is missing: the folder records no tokenizer (save it with `train --save`, "
        "which writes one)",
        path.string());
  }
  const std::string text =
      input_file_read(path.string(), input_kind::kTokenizerConfig, InputLinks::refuse);
  Json j;
  try {
    j = json_parse(text, path.string(), "the saved folder is damaged");
  } catch (const Error& e) {
    fail_config("{}; fix or remove the file, or name the tokenizer with --tokenizer-type",
                e.what());
  }
  if (!j.is_object()) fail_config("{}: not a JSON object", path.string());
  return j;
}

// The --tokenizer-type the config names; for a plain Hugging Face folder the type whose row
// detects it (tokenizer_types.h: HuggingFaceTokenizer when it has tokenizer.json, else
// Llama2Tokenizer for a Llama).
std::string saved_type(const Json& config, const fs::path& path) {
  if (const auto t = config.find("infinipipe_tokenizer_type"); t != config.end()) {
    return json_string(*t, path.string() + ": infinipipe_tokenizer_type");
  }
  SavedFolder folder;
  folder.has_tokenizer_json =
      saved_file_exists(path.parent_path() / kTokenizerJsonFile, input_kind::kTokenizerModel);
  const auto c = config.find("tokenizer_class");
  if (c != config.end() && c->is_string()) folder.tokenizer_class = c->get<std::string>();
  for (const TokenizerType& t : kTokenizerTypes)
    if (t.detect != nullptr && t.detect(folder)) return std::string(t.name);
  fail_config(
      "{}: names no infinipipe_tokenizer_type, the folder has no tokenizer.json and "
      "tokenizer_class {} is not LlamaTokenizer; infinipipe opens only its own tokenizer types "
      "({})",
      path.string(), c == config.end() ? "is missing" : json_brief(*c),
      tokenizer_types_text<TokenizerTypesText::names>());
}

// The file of `file` in a saved folder.
const char* saved_file_name(TokenizerFile file) {
  return file == TokenizerFile::hf_tokenizer_json ? kTokenizerJsonFile : kTokenizerModelFile;
}

}  // namespace

bool tokenizer_type_has_model(const std::string& type) {
  const TokenizerType* t = tokenizer_type_find(type);
  return t != nullptr && t->file == TokenizerFile::sentencepiece_model;
}

bool tokenizer_type_has_json(const std::string& type) {
  const TokenizerType* t = tokenizer_type_find(type);
  return t != nullptr && t->file == TokenizerFile::hf_tokenizer_json;
}

Json tokenizer_saved_config(const Tokenizer& tokenizer, int64_t model_max_length) {
  if (tokenizer_type_has_json(tokenizer.type())) {
    return hf_tokenizer_saved_config(tokenizer, model_max_length);
  }
  const bool sp = tokenizer_type_has_model(tokenizer.type());
  const TokenizerType* type = tokenizer_type_find(tokenizer.type());
  return {{"tokenizer_class", sp ? Json("LlamaTokenizer") : Json(nullptr)},
          {"infinipipe_tokenizer_type", tokenizer.type()},
          {"add_bos_token", type != nullptr && type->bos_first},
          {"add_eos_token", false},
          {"model_max_length", model_max_length}};
}

std::unique_ptr<Tokenizer> tokenizer_open_saved(const std::string& dir) {
  const fs::path config_path = fs::path(dir) / kTokenizerConfigFile;
  // Checkpoints from before tokenizers were saved have no config: all of them used bytes.
  if (!saved_file_exists(config_path, input_kind::kTokenizerConfig)) {
    return tokenizer_open(std::string(kDefaultTokenizerType), "");
  }
  const std::string type = saved_type(read_config(config_path), config_path);
  const TokenizerType* row = tokenizer_type_find(type);
  const TokenizerFile file = row != nullptr ? row->file : TokenizerFile::none;
  // The SentencePiece model is opened as the file; a Hugging Face tokenizer as the folder, whose
  // tokenizer_config.json goes with its tokenizer.json.
  std::string model_path;
  if (file != TokenizerFile::none) {
    const fs::path saved = fs::path(dir) / saved_file_name(file);
    if (!saved_file_exists(saved, input_kind::kTokenizerModel)) {
      fail_config(
          "{} names {}, but {} is missing; copy the {} there", config_path.string(), type,
          saved.string(),
          file == TokenizerFile::hf_tokenizer_json ? "tokenizer.json" : "SentencePiece model");
    }
    model_path = file == TokenizerFile::hf_tokenizer_json ? dir : saved.string();
  }
  try {
    return tokenizer_open(type, model_path);
  } catch (const ConfigError& e) {
    fail_config(
        "{} (from {}); fix the folder, or name the tokenizer with --tokenizer-type "
        "(and --tokenizer-model)",
        e.what(), config_path.string());
  }
}

}  // namespace infinipipe::tokenize
