#include "tokenize/tokenizer.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tokenize/tokenizer_types.h"

namespace infinipipe::tokenize {

const TokenizerType* tokenizer_type_find(std::string_view name) {
  for (const TokenizerType& t : kTokenizerTypes)
    if (t.name == name) return &t;
  return nullptr;
}

std::unique_ptr<Tokenizer> tokenizer_open(const std::string& type, const std::string& model_path) {
  const TokenizerType* row = tokenizer_type_find(type);
  if (row == nullptr) {
    fail_config("--tokenizer-type {} is not supported; use one of: {}", type,
                tokenizer_types_text<TokenizerTypesText::names>());
  }
  return row->open(model_path);
}

}  // namespace infinipipe::tokenize
