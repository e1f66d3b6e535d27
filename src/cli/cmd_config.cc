// `infinipipe config show|check`: print the fully resolved configuration, or validate a file.
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/parallel_auto.h"
#include "options/megatron_defaults.h"
#include "options/options.h"
#include "plan/schedule_table.h"
#include "runtime/checkpoint_meta.h"
#include "setup/layout_search_base.h"
#include "setup/train_config.h"

namespace infinipipe::cli {

namespace {

// The options resolved and checked, every problem in one message. An auto degree is train's to
// choose: kept as auto, the rest checked as train checks it.
Config config_resolved(const options::ConfigOptions& opts) {
  if (!parallel_has_auto(options::resolve_config_lenient(opts).parallel))
    return options::resolve_config(opts);
  return setup::validate_keeping_auto(options::resolve_config(opts, Config{}, false));
}

}  // namespace

void add_config_command(CLI::App& app) {
  CLI::App* config = app.add_subcommand("config", "show or check a configuration");
  config->require_subcommand(1);

  CLI::App* show = config->add_subcommand(
      "show", "print the fully resolved configuration (defaults < --config file < flags) as YAML");
  auto show_opts = options::add_config_options(show);
  auto diff = std::make_shared<bool>(false);
  show->add_flag("--diff-megatron", *diff,
                 "list the options whose value differs from Megatron-LM's default, and why "
                 "(docs/megatron.md)");
  show->callback([show_opts, diff] {
    // An auto degree is train's to choose: shown as auto, the rest checked as train checks it.
    const Config cfg = config_resolved(*show_opts);
    if (*diff)
      fmt::print("{}\n{}",
                 options::format_default_differences(options::megatron_default_differences(cfg)),
                 options::format_semantic_differences(options::megatron_semantic_differences(cfg)));
    else
      // The tokenizer the run will use, taken from the --load folder when no flag names one.
      fmt::print("{}", options::config_to_yaml(runtime::config_with_run_tokenizer(cfg)));
  });

  CLI::App* check = config->add_subcommand(
      "check",
      "validate a configuration as `infinipipe train` reads it: a YAML FILE (or --config FILE), "
      "flags, or both; every refused or invalid option is named in one message, with what train "
      "cannot run (--bf16 on a CPU, say)");
  auto check_opts = options::add_config_options(check);
  setup::train_checks_install(*check_opts, false);
  check->footer("FILE: a YAML file of Megatron-LM keys, as --config FILE");
  check->callback([check_opts] {
    // FILE is the first word CLI11 left unmatched (a positional would take the value of an
    // unknown Megatron flag, `--attention-backend fused`).
    const std::vector<std::string> words = check_opts->command->remaining();
    std::string name = check_opts->config_file;
    if (!words.empty() && words.front().compare(0, 1, "-") != 0) {
      if (!check_opts->config_file.empty())
        fail_config("give the file once: as FILE ({}) or as --config ({})", words.front(),
                    check_opts->config_file);
      name = check_opts->config_file = words.front();
      check_opts->extras_skip = 1;
      check_opts->config_label = "";
    }
    const Config cfg = config_resolved(*check_opts);
    fmt::print("{}: ok{}\n", name.empty() ? "the options" : name,
               parallel_has_auto(cfg.parallel)
                   ? " (its auto degrees are chosen by train's layout search)"
                   : "");
  });
}

}  // namespace infinipipe::cli
