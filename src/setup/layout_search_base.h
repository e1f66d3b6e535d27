// What every layout search starts from (`plan` / `simulate --search-layout`, `train --pp auto`,
// the PyTorch trainer's auto degrees): the configuration with the layout flags set aside, the
// checks an auto layout must pass before it is searched, and the search's thread count.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "options/options.h"
#include "sim/layout_search.h"

namespace infinipipe::setup {

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

}  // namespace infinipipe::setup
