// Every option of Megatron-LM's megatron/training/arguments.py in exactly one class, so a
// Megatron-LM script either runs with the same meaning or is refused with the reason
// (docs/megatron.md). The table is data (megatron_flag_table.cc); a name is *supported* as soon
// as infinipipe has an option spec of that name (options.cc), whatever the table says.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/config.h"

namespace infinipipe::options {

enum class FlagClass {
  supported,   // an infinipipe option of the same name and meaning
  neutral,     // accepted at the value that changes nothing here; any other value refused
  irrelevant,  // accepted and without effect here (logging, fusion, kernel choice): a note
  refused,     // refused with the reason and the infinipipe way
  unknown,     // not a Megatron-LM option
};
const char* flag_class_name(FlagClass c);

// A Megatron option accepted only where it changes nothing. `ok` says whether `value` is
// neutral for the resolved configuration (kv-channels must be hidden / heads, say).
struct NeutralFlag {
  std::string name;
  std::string neutral;  // the neutral value, in words, for messages and docs/megatron.md
  std::string why;      // why other values are refused, and what to use instead
  bool (*ok)(const std::string& value, const Config& cfg) = nullptr;  // null: value == neutral
};

// Flags that share one reason: irrelevant here, or refused.
struct FlagGroup {
  std::string why;
  std::vector<std::string> names;
};

const std::vector<NeutralFlag>& megatron_neutral_flags();
const std::vector<FlagGroup>& megatron_irrelevant_flags();
const std::vector<FlagGroup>& megatron_refused_flags();
// Megatron options other work in progress adds; once their option spec exists they are
// supported (the spec wins) and the name should leave this list.

struct FlagInfo {
  FlagClass cls = FlagClass::unknown;
  std::string why;
  const NeutralFlag* neutral = nullptr;
};
// The class of `name` (dashes or underscores): supported when an option spec has it.
FlagInfo megatron_flag(const std::string& name);

// Megatron options given without an option spec (key -> last value, and where it came from),
// checked once the configuration is resolved: a neutral one at another value, a refused or
// unknown one is a ConfigError; an irrelevant one adds a note.
struct MegatronExtras {
  std::map<std::string, std::string> value;
  std::map<std::string, std::string> origin;  // "--key" or "file.yaml (line 3)"
};
// Records `key` (not an option spec) or throws for a refused or unknown key at once.
void megatron_extras_add(MegatronExtras& extras, const std::string& key, const std::string& value,
                         const std::string& origin);
// A problem goes to `errors` when given (every one collected), else the first one throws.
void megatron_extras_check(const MegatronExtras& extras, const Config& cfg,
                           std::vector<std::string>& notes,
                           std::vector<std::string>* errors = nullptr);

// The nearest known option name to a mistyped `key`, "" when none is close: a name `key` is a
// prefix of first, then the least edit distance (ties: the longer common prefix).
std::string nearest_option_name(const std::string& key);

// The flag tables of docs/megatron.md, by class; `arguments_py_names` gives the supported ones.
std::string megatron_flags_markdown(const std::vector<std::string>& arguments_py_names);

}  // namespace infinipipe::options
