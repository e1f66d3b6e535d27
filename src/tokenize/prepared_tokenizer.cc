#include "tokenize/prepared_tokenizer.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"

namespace infinipipe::tokenize {

using Json = nlohmann::json;

namespace {

void write_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) fail("cannot write {}", tmp);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail("cannot write {}", path);
  }
}

}  // namespace

std::string prepared_tokenizer_path(const std::string& prefix) {
  return prefix + ".tokenizer_info.json";
}

bool prepared_tokenizer_exists(const std::string& prefix) {
  struct stat st {};
  return ::stat(prepared_tokenizer_path(prefix).c_str(), &st) == 0;
}

void prepared_tokenizer_write(const std::string& prefix, const Tokenizer& tokenizer,
                              const std::string& model_path, bool append_eod) {
  const Json j = {{"tokenizer_type", tokenizer.type()},
                  {"tokenizer_model", model_path},
                  {"vocab_size", tokenizer.vocab_size()},
                  {"eod", tokenizer.eod()},
                  {"bos", tokenizer.bos()},
                  {"eos", tokenizer.eos()},
                  {"append_eod", append_eod}};
  write_atomic(prepared_tokenizer_path(prefix), j.dump(2) + "\n");
}

void prepared_tokenizer_check(const std::string& prefix, const Tokenizer& tokenizer) {
  if (!prepared_tokenizer_exists(prefix)) return;
  const std::string path = prepared_tokenizer_path(prefix);
  const std::string text = input_file_read(path, input_kind::kTokenizerConfig);
  const char* fix = "remove the file if the data is right for this tokenizer";
  Json j;
  try {
    j = json_parse(text, path);
  } catch (const Error& e) {
    fail_config("{}; {}", e.what(), fix);
  }
  if (!j.is_object() || !j.contains("tokenizer_type") || !j.contains("vocab_size")) {
    fail_config("{}: not a tokenizer record of `data prepare`; {}", path, fix);
  }
  const std::string& type = json_string(j["tokenizer_type"], path + ": tokenizer_type");
  const int64_t vocab = json_int(j["vocab_size"], path + ": vocab_size", 0);
  if (type != tokenizer.type() || vocab != tokenizer.vocab_size()) {
    const std::string model = j.contains("tokenizer_model")
                                  ? json_string(j["tokenizer_model"], path + ": tokenizer_model")
                                  : std::string();
    fail_config(
        "{} was prepared with {}{} (vocabulary {}), but this run's tokenizer is {} (vocabulary "
        "{}): its ids would mean other text. Train with the data's tokenizer "
        "(--tokenizer-type {}{}) or prepare the data again with the run's",
        prefix, type, model.empty() ? "" : " " + model, vocab, tokenizer.type(),
        tokenizer.vocab_size(), type, model.empty() ? "" : " --tokenizer-model " + model);
  }
}

}  // namespace infinipipe::tokenize
