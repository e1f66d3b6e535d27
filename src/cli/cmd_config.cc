#include "cli/commands.h"

namespace infinipipe::cli {
void add_config_command(CLI::App& app) { app.add_subcommand("config", "show or check a configuration"); }
}  // namespace infinipipe::cli
