// `plan --search-layout` and `simulate --search-layout`: the options, the configuration the search
// starts from (the layout flags set aside), and the run that prints the ranking; and what
// `train --pp auto` shares with them (the search base and the sampled batches' search).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "options/cli11_fwd.h"

#include "cli/workload.h"
#include "core/config.h"
#include "options/options.h"
#include "sim/layout_search.h"

namespace infinipipe::cli {

struct SearchLayoutArgs {
  bool enabled = false;
  int64_t iterations = 4;
  int64_t threads = 0;      // 0 = every core
  bool exhaustive = false;  // plan every layout, none skipped by its bound
  CLI::Option* iterations_option = nullptr;
  CLI::Option* threads_option = nullptr;
  CLI::Option* exhaustive_option = nullptr;
  // Whether the search was asked for; ConfigError when --search-iterations, --search-threads or
  // --search-layout-exhaustive came without it.
  bool asked(const char* without) const;
};

// --search-layout, --search-iterations, --search-threads and --search-layout-exhaustive.
std::shared_ptr<SearchLayoutArgs> add_search_layout_options(CLI::App* cmd);
// --search-threads' value: the threads to use (0 = every core); ConfigError when out of range.
int search_threads(int64_t threads);

// Every option but the layout's, validated at the trivial layout of one device (pp, dp, vpp and
// Ulysses 1, schedule epp, one device): what every layout search starts from.
Config validate_except_layout(const Config& raw);
// --outlier-delay with auto degrees: its batches depend on dp, so dp must be a number, and one the
// delay can balance (>= 2, global-batch-size >= 2 x dp). ConfigError otherwise.
void outlier_delay_check_before_search(const Config& raw);
// `raw` with its auto degrees kept (`config show`, `config check`): checked as train checks it
// before its layout search (validate_except_layout, each degree given as a number >= 1), the
// layout itself left to that search. ConfigError on any mistake.
Config validate_keeping_auto(const Config& raw);

// The configuration to search from: every option but the layout's, validated at the trivial
// layout of one device; `space` gets the cluster: `devices` when > 0, else --num-devices, else
// pp x ulysses x dp of the flags; --devices-per-node, else one node.
Config layout_search_base(const options::ConfigOptions& options, const Config& defaults,
                          int64_t devices, sim::LayoutSpace& space);

// Samples the workload's batches, searches every layout of `space` and prints the ranking;
// writes it as JSON to `json_out` unless empty.
void layout_search_run(const SearchLayoutArgs& args, const options::ConfigOptions& options,
                       const WorkloadLoader& load, const std::string& json_out);

}  // namespace infinipipe::cli
