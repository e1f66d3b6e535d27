// Each subcommand of `infinipipe` registers itself on the top-level app.
// Exit codes: 0 success, 2 usage/configuration error, 1 runtime failure.
#pragma once

#include "options/cli11_fwd.h"

namespace infinipipe::cli {

void add_config_command(CLI::App& app);
void add_plan_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_data_command(CLI::App& app);
void add_cost_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_checkpoint_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_generate_command(CLI::App& app);

}  // namespace infinipipe::cli
