#include "data/tokenizer_saved.h"

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
#include "data/hf_tokenizer.h"

namespace infinipipe::data {

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

// The --tokenizer-type the config names; for a plain Hugging Face folder HuggingFaceTokenizer
// when it has tokenizer.json, else Llama2Tokenizer for a Llama.
std::string saved_type(const Json& config, const fs::path& path) {
  if (const auto t = config.find("infinipipe_tokenizer_type"); t != config.end()) {
    return json_string(*t, path.string() + ": infinipipe_tokenizer_type");
  }
  if (saved_file_exists(path.parent_path() / kTokenizerJsonFile, input_kind::kTokenizerModel)) {
    return "HuggingFaceTokenizer";
  }
  const auto c = config.find("tokenizer_class");
  if (c != config.end() && c->is_string() &&
      (*c == "LlamaTokenizer" || *c == "LlamaTokenizerFast")) {
    return "Llama2Tokenizer";
  }
  fail_config(
      "{}: names no infinipipe_tokenizer_type, the folder has no tokenizer.json and "
      "tokenizer_class {} is not LlamaTokenizer; infinipipe opens only its own tokenizer types "
      "({})",
      path.string(), c == config.end() ? "is missing" : json_brief(*c),
      fmt::join(tokenizer_types(), ", "));
}

}  // namespace

bool tokenizer_type_has_model(const std::string& type) {
  return type == "SentencePieceTokenizer" || type == "GPTSentencePieceTokenizer" ||
         type == "Llama2Tokenizer";
}

bool tokenizer_type_has_json(const std::string& type) {
  return type == "HuggingFaceTokenizer";
}

Json tokenizer_saved_config(const Tokenizer& tokenizer, int64_t model_max_length) {
  if (tokenizer_type_has_json(tokenizer.type())) {
    return hf_tokenizer_saved_config(tokenizer, model_max_length);
  }
  const bool sp = tokenizer_type_has_model(tokenizer.type());
  return {{"tokenizer_class", sp ? Json("LlamaTokenizer") : Json(nullptr)},
          {"infinipipe_tokenizer_type", tokenizer.type()},
          {"add_bos_token", tokenizer.type() == "Llama2Tokenizer"},
          {"add_eos_token", false},
          {"model_max_length", model_max_length}};
}

std::unique_ptr<Tokenizer> tokenizer_open_saved(const std::string& dir) {
  const fs::path config_path = fs::path(dir) / kTokenizerConfigFile;
  // Checkpoints from before tokenizers were saved have no config: all of them used bytes.
  if (!saved_file_exists(config_path, input_kind::kTokenizerConfig)) {
    return tokenizer_open("ByteTokenizer", "");
  }
  const std::string type = saved_type(read_config(config_path), config_path);
  const fs::path model = fs::path(dir) / kTokenizerModelFile;
  const bool has_model = tokenizer_type_has_model(type);
  if (has_model && !saved_file_exists(model, input_kind::kTokenizerModel)) {
    fail_config("{} names {}, but {} is missing; copy the SentencePiece model there",
                config_path.string(), type, model.string());
  }
  if (tokenizer_type_has_json(type)) {
    const fs::path json = fs::path(dir) / kTokenizerJsonFile;
    if (!saved_file_exists(json, input_kind::kTokenizerModel)) {
      fail_config("{} names {}, but {} is missing; copy the tokenizer.json there",
                  config_path.string(), type, json.string());
    }
  }
  try {
    if (tokenizer_type_has_json(type)) return tokenizer_open(type, dir);
    return tokenizer_open(type, has_model ? model.string() : "");
  } catch (const ConfigError& e) {
    fail_config(
        "{} (from {}); fix the folder, or name the tokenizer with --tokenizer-type "
        "(and --tokenizer-model)",
        e.what(), config_path.string());
  }
}

}  // namespace infinipipe::data
