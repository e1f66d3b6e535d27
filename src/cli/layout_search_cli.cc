#include "cli/layout_search_cli.h"

#include <chrono>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/error.h"
#include "core/output_file.h"
#include "cost/calibration.h"
#include "profile/profile.h"
#include "setup/layout_search_base.h"
#include "sim/layout_search_report.h"

namespace infinipipe::cli {

bool SearchLayoutArgs::asked(const char* without) const {
  for (const CLI::Option* o : {iterations_option, threads_option, exhaustive_option})
    if (!enabled && o && o->count() > 0)
      fail_config("{} sizes the layout search: add {} or drop it", o->get_name(), without);
  return enabled;
}

std::shared_ptr<SearchLayoutArgs> add_search_layout_options(CLI::App* cmd) {
  auto a = std::make_shared<SearchLayoutArgs>();
  cmd->add_flag("--search-layout", a->enabled,
                "rank every (pp, vpp, ulysses, dp, schedule) of the cluster (--num-devices, "
                "--devices-per-node, the memory budget) by predicted tokens/s on a sample of the "
                "workload's batches, with peak memory per stage and why the others cannot run; "
                "the configuration's own layout is set aside");
  a->iterations_option =
      cmd->add_option("--search-iterations", a->iterations,
                      "with --search-layout: consecutive global batches sampled from --iteration")
          ->capture_default_str();
  a->threads_option = cmd->add_option(
      "--search-threads", a->threads,
      "with --search-layout: layouts evaluated at once (0 = every core); the ranking is the same");
  a->exhaustive_option = cmd->add_flag(
      "--search-layout-exhaustive", a->exhaustive,
      "with --search-layout: plan every layout; without it a layout whose bound on tokens/s is "
      "below the best found is listed as not evaluated (the best is the same either way)");
  return a;
}

void layout_search_run(const SearchLayoutArgs& args, const options::ConfigOptions& options,
                       const WorkloadLoader& load, const std::string& json_out) {
  if (args.iterations < 1)
    fail_config("--search-iterations must be >= 1 (global batches to sample), got {}",
                args.iterations);
  if (const CLI::Option* replica = options.command->get_option("--replica"); replica->count() > 0)
    fail_config(
        "--replica picks one replica's share to plan, but --search-layout splits every batch "
        "over each layout's replicas: drop --replica");
  sim::LayoutSpace space;
  const Config base = setup::layout_search_base(options, Config{}, 0, space);
  space.threads = setup::search_threads(args.threads);
  space.exhaustive = args.exhaustive;
  cost::CostModel cm = profile::planning_cost_model(base);
  // A calibration's measured hosts and links (`profile` under mpirun): the search prices each
  // transfer by the link it crosses and ranks both rank orders.
  if (cm.host_links().empty() && !base.cluster.calibration.empty()) {
    const cost::Calibration cal = cost::load_calibration(base.cluster.calibration);
    if (!cal.host_links.empty()) cm = cm.with_host_links(cal.host_links);
  }
  const auto batches = load.batches(base, args.iterations);
  const auto t0 = std::chrono::steady_clock::now();
  const sim::LayoutSearchResult r = sim::layout_search(base, cm, space, batches);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("{}", sim::layout_search_markdown(r, space));
  if (r.best()) fmt::print("\nbest: {}\n", sim::layout_search_choice(r));
  fmt::print("({} layouts searched{} in {:.1f} s on {} threads)\n", r.ranked.size(),
             sim::layout_search_skipped(r) > 0
                 ? fmt::format(", {} not evaluated,", sim::layout_search_skipped(r))
                 : std::string(),
             secs, space.threads);
  if (json_out.empty()) return;
  output_file_write(json_out, sim::layout_search_json(r, space).dump(1) + "\n",
                    "the layout search's JSON");
  fmt::print("wrote {}\n", json_out);
}

}  // namespace infinipipe::cli
