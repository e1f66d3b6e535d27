// `plan --search-layout` and `simulate --search-layout`: their options and the run that prints
// the ranking; what the search starts from is setup/layout_search_base.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "options/cli11_fwd.h"

#include "cli/workload.h"
#include "options/options.h"

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

// Samples the workload's batches, searches every layout of `space` and prints the ranking;
// writes it as JSON to `json_out` unless empty.
void layout_search_run(const SearchLayoutArgs& args, const options::ConfigOptions& options,
                       const WorkloadLoader& load, const std::string& json_out);

}  // namespace infinipipe::cli
