// `train --pp auto` (and --dp, --vpp, --ulysses-degree auto): before the run, the first rank
// searches the layouts of the world's ranks that the runtime can execute (pp x dp, no Ulysses on
// CPU; the configured schedule) on a sample of the run's own training batches, prints the choice
// in one line, and every rank trains with it: the chosen degrees are appended to the options as
// flags, so `config show`-style output, traces and checkpoints carry the resolved values.
// With links measured between two hosts or more (`--measure-links`) the search prices every
// transfer by the link it crosses, and with `--rank-placement auto` it ranks both rank orders
// too (at the run's own degrees when none is auto), printing why it chose one: the order is
// appended as --rank-placement.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cost/core_sharing.h"
#include "cost/host_link_table.h"
#include "options/options.h"

namespace infinipipe::setup {

// pp, vpp, ulysses, dp, schedule (as Schedule's value), rank order (as RankOrder's value): what
// the first rank tells the others.
using ChosenLayout = std::array<int64_t, 6>;

struct TrainAutoLayout {
  int world = 1;
  bool searcher = true;                      // this rank searches (the first one)
  bool print = true;                         // print the chosen layout
  // Where a printed line goes (without its newline); empty: stdout.
  std::function<void(const std::string&)> say;
  int64_t search_iterations = 4;             // training batches sampled
  bool search_iterations_given = false;      // --search-iterations on the command line
  std::function<void(ChosenLayout&)> share;  // from the searcher to every rank; may be empty
  // Where every world rank runs, by rank: called on every rank before the search (under mpirun a
  // collective), so layouts whose ranks share cores are ranked as train will plan them. May be
  // empty: a core per rank.
  std::function<std::vector<cost::RankHost>()> hosts;
  // `--measure-links`: the links between the job's hosts, measured on every rank before the
  // search (and before the groups, whose order it may choose). Empty: not measured.
  cost::HostLinkTable links;
};

// The layout search's sample: the run's first `count` global batches (at most the iterations it
// trains), drawn as the trainer draws them (data/training_batches.h: seed, split, blend; no
// outlier delay, whose batches depend on the layout: outlier_delay_check_before_search refuses
// it with an auto degree); a run resuming with --load starts at its checkpoint's position, so
// the search sees the iterations the resumed run trains next.
std::vector<std::vector<int64_t>> train_search_batches(const Config& cfg, int64_t count);

// `options` unchanged when no degree is auto and no rank order is to be chosen with the links
// (ConfigError if --search-iterations was given), else a copy with the chosen degrees (and the
// chosen --rank-placement) appended. With pp auto a dp the options do not give is
// searched too, and the other way round (Megatron derives dp from the world); degrees given as
// numbers are fixed. `defaults` is what the flags apply to (the model
// of a Hugging Face folder the run starts from).
std::shared_ptr<options::ConfigOptions> train_resolve_auto_layout(
    const std::shared_ptr<options::ConfigOptions>& options, const Config& defaults,
    const TrainAutoLayout& how);

}  // namespace infinipipe::setup
