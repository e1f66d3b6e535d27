// The configuration surface shared by every subcommand: Megatron-LM-named flags and the same
// keys (without dashes) in a `--config FILE.yaml`. Precedence: defaults < file < flags.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "options/cli11_fwd.h"

#include "core/config.h"

namespace infinipipe::options {

struct ConfigOptions {
  std::string config_file;
  std::vector<std::pair<std::string, std::string>> flags;  // (key, value) in command-line order
  CLI::App* command = nullptr;                             // to read unmatched arguments
  // Where CLI11 stores a boolean flag's raw text (`--x`, `--x=false`) before it is copied into
  // `flags`; one per flag, as CLI11 keeps a reference.
  std::deque<std::string> flag_text;
  // Leading unmatched words the command took for itself (config check's FILE), and the name a
  // config file's messages give it.
  size_t extras_skip = 0;
  std::string config_label = "--config";
  // The processes of the run (`train`: the MPI world; 0 = unknown): without
  // --data-parallel-size, dp = world / (pp x ulysses), as Megatron-LM derives it.
  int64_t world_size = 0;
  // What the command itself cannot run (train: --bf16 on a CPU, say), checked with the options
  // so every problem is named in one message, before the command starts any work.
  std::function<void(const Config&, int64_t world_size, std::vector<std::string>& problems)>
      command_checks;
};

// Adds `--config FILE` and every configuration flag to `cmd` (unknown flags are collected
// so resolve_config can suggest the nearest known key).
std::shared_ptr<ConfigOptions> add_config_options(CLI::App* cmd);

// Defaults (`base`), then the YAML file, then the flags (a repeated flag: the last wins);
// validates unless told not to; throws ConfigError naming every mistake (each option's, then the
// whole configuration's, then the command's checks). Notes (an option without effect
// here, one the schedule does not use) go to `notes`, or without it to stderr, once per process
// and on rank 0 only; without validation there are no notes (they need the final configuration).
Config resolve_config(const ConfigOptions& opts, const Config& base = Config{},
                      bool validate = true, std::vector<std::string>* notes = nullptr);
// The options as far as they can be read, every mistake ignored (resolve_config reports them):
// for what must be known before the full resolution (the folder --load names, say).
Config resolve_config_lenient(const ConfigOptions& opts, const Config& base = Config{});
// Command-line words (`{"--pp", "2", "--config", "f.yaml"}`) parsed as a command's flags would
// be: the options, and the parser that holds their unmatched words (it must outlive them). A word
// CLI11 cannot parse is a ConfigError.
struct ParsedArgs {
  std::shared_ptr<CLI::App> parser;
  std::shared_ptr<ConfigOptions> options;
};
ParsedArgs parse_config_args(const std::vector<std::string>& args);
// resolve_config of parse_config_args(args).
Config resolve_config_args(const std::vector<std::string>& args, const Config& base = Config{},
                           bool validate = true, std::vector<std::string>* notes = nullptr);

// Applies YAML text (a map of keys to scalars; a words option such as data-path may be a list)
// onto `cfg`; `origin` names the source in errors.
void apply_yaml(Config& cfg, const std::string& yaml_text, const std::string& origin);
// Sets one key (Megatron name without dashes, an alias, or `no-KEY` of a boolean) from text.
void apply_option(Config& cfg, const std::string& key, const std::string& value);

// Every key with its resolved value, as YAML that `--config` accepts back.
std::string config_to_yaml(const Config& cfg);
std::vector<std::string> config_keys();
// Whether `key` (dashes or underscores) names an option spec; every spec name and alias.
bool is_option_name(const std::string& key);
// The value of option `key` in `cfg` as `config show` prints it (without quotes).
std::string option_value(const Config& cfg, const std::string& key);
std::vector<std::string> option_names();

}  // namespace infinipipe::options
