// Each subcommand of `infinipipe` registers itself on the top-level app.
// Exit codes: 0 success, 2 usage/configuration error, 1 runtime failure.
#pragma once

#include <CLI/CLI.hpp>

namespace infinipipe::cli {

void add_config_command(CLI::App& app);

}  // namespace infinipipe::cli
