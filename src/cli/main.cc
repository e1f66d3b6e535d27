#include <cstdio>
#include <exception>
#include <filesystem>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/flag_ranges.h"
#include "core/allocator_keep.h"
#include "core/error.h"

int main(int argc, char** argv) {
  infinipipe::allocator_keep_freed_memory();
  infinipipe::allocator_huge_pages(size_t{256} << 20);
  CLI::App app{
      "infinipipe: plan and train long-context LLMs with Elastic Pipeline Parallelism.\n"
      "Flags and YAML keys follow Megatron-LM's names; see `infinipipe <command> --help`.",
      "infinipipe"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "infinipipe 0.1.0");
  infinipipe::cli::add_config_command(app);
  infinipipe::cli::add_plan_command(app);
  infinipipe::cli::add_simulate_command(app);
  infinipipe::cli::add_data_command(app);
  infinipipe::cli::add_cost_command(app);
  infinipipe::cli::add_train_command(app);
  infinipipe::cli::add_checkpoint_command(app);
  infinipipe::cli::add_profile_command(app);
  infinipipe::cli::add_report_command(app);
  infinipipe::cli::add_generate_command(app);
  infinipipe::cli::integer_flags_bound(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    fmt::print(stderr, "infinipipe: error: {}\n", infinipipe::cli::parse_error_message(app, e.what()));
    return 2;
  } catch (const infinipipe::ConfigError& e) {
    fmt::print(stderr, "infinipipe: error: {}\n", e.what());
    return 2;
  } catch (const infinipipe::Error& e) {
    fmt::print(stderr, "infinipipe: error: {}\n", e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the user gave that cannot be used (a symlink loop, no permission): their files.
    fmt::print(stderr, "infinipipe: error: {}; check the path and its permissions\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "infinipipe: internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}
