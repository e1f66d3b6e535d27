#include "data/tokenizer_saved.h"

#include <filesystem>

#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe::data {

namespace fs = std::filesystem;

std::unique_ptr<Tokenizer> tokenizer_open_saved(const std::string& dir) {
  const fs::path config = fs::path(dir) / kTokenizerConfigFile;
  std::error_code ec;
  if (!fs::exists(config, ec)) return tokenizer_open("ByteTokenizer", "");
  const std::string hint =
      "; fix or remove the file, or name the tokenizer with --tokenizer-type (and "
      "--tokenizer-model)";
  nlohmann::json j;
  try {
    j = json_read_file(config.string());
  } catch (const Error& e) {
    fail_config("{}{}", e.what(), hint);
  }
  const auto type = j.is_object() ? j.find("infinipipe_tokenizer_type") : j.end();
  if (!j.is_object() || type == j.end() || !type->is_string()) {
    fail_config("{} does not name its tokenizer (no string field infinipipe_tokenizer_type){}",
                config.string(), hint);
  }
  const std::string name = type->get<std::string>();
  if (name == "ByteTokenizer") return tokenizer_open(name, "");
  const fs::path model = fs::path(dir) / kTokenizerModelFile;
  if (!fs::exists(model, ec)) {
    fail_config("{} names {}, but {} is missing{}", config.string(), name, model.string(), hint);
  }
  try {
    return tokenizer_open(name, model.string());
  } catch (const ConfigError& e) {
    fail_config("{} (from {}){}", e.what(), config.string(), hint);
  }
}

}  // namespace infinipipe::data
