// `infinipipe config show|check`: print the fully resolved configuration, or validate a file.
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/layout_search_cli.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/parallel_auto.h"
#include "options/megatron_defaults.h"
#include "options/options.h"
#include "plan/schedule_table.h"

namespace infinipipe::cli {

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
    const Config raw = options::resolve_config(*show_opts, Config{}, false);
    const Config cfg = parallel_has_auto(raw.parallel) ? validate_keeping_auto(raw)
                                                       : options::resolve_config(*show_opts);
    if (*diff)
      fmt::print("{}",
                 options::format_default_differences(options::megatron_default_differences(cfg)));
    else
      fmt::print("{}", options::config_to_yaml(cfg));
  });

  CLI::App* check = config->add_subcommand("check", "validate a YAML configuration file");
  auto file = std::make_shared<std::string>();
  check->add_option("FILE", *file, "YAML file with Megatron-LM keys")->required();
  check->callback([file] {
    Config cfg;
    options::apply_yaml(cfg, input_file_read(*file, input_kind::kConfigYaml), *file);
    if (parallel_has_auto(cfg.parallel)) {
      validate_keeping_auto(cfg);
      fmt::print("{}: ok (its auto degrees are chosen by train's layout search)\n", *file);
      return;
    }
    cfg.validate();
    plan::schedule_check_layout(cfg.parallel);
    fmt::print("{}: ok\n", *file);
  });
}

}  // namespace infinipipe::cli
