// The option specs: every configuration key with its aliases, kind, help, and how it reads
// and prints its Config field. One table, shared by the flags, the YAML reader and `config show`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/config.h"

namespace infinipipe::options {

// words: one or more values (`--data-path 0.3 A 0.7 B`), kept joined by single spaces; a YAML
// list of scalars is accepted too.
enum class Kind { integer, real, text, flag, bytes, choice, words };

struct OptionSpec {
  std::string key;  // Megatron-LM name without the leading dashes
  std::vector<std::string> aliases;
  Kind kind;
  std::string help;
  std::function<void(Config&, const std::string&)> set;
  std::function<std::string(const Config&)> get;
  // false for another name of a field another spec shows (untie-embeddings-...): not in
  // `config show`, so the YAML it prints has every field once.
  bool shown = true;
};

bool to_bool(const std::string& key, const std::string& v);
const std::vector<OptionSpec>& option_specs();

}  // namespace infinipipe::options
