#include "cli/layout_search_cli.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/error.h"
#include "core/output_file.h"
#include "core/parallel_auto.h"
#include "cost/calibration.h"
#include "profile/profile.h"
#include "sim/layout_search_report.h"

namespace infinipipe::cli {

bool SearchLayoutArgs::asked(const char* without) const {
  for (const CLI::Option* o : {iterations_option, threads_option, exhaustive_option})
    if (!enabled && o && o->count() > 0)
      fail_config("{} sizes the layout search: add {} or drop it", o->get_name(), without);
  return enabled;
}

int search_threads(int64_t threads) {
  if (threads < 0 || threads > 4096)
    fail_config("--search-threads must be 0 (every core) or 1..4096, got {}", threads);
  if (threads > 0) return static_cast<int>(threads);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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

Config validate_except_layout(const Config& raw) {
  Config base = raw;
  base.parallel.pipeline_parallel = base.parallel.data_parallel = 1;
  base.parallel.ulysses_degree = base.parallel.virtual_stages = 1;
  base.parallel.layers_per_virtual_stage = 0;
  base.parallel.schedule = Schedule::epp;
  base.cluster.num_devices = base.cluster.devices_per_node = 1;
  base.parallel.outlier_delay = false;  // it needs dp >= 2, checked with each layout's dp
  base.validate();
  base.parallel.outlier_delay = raw.parallel.outlier_delay;
  return base;
}

void outlier_delay_check_before_search(const Config& raw) {
  if (!raw.parallel.outlier_delay) return;
  const int64_t dp = raw.parallel.data_parallel;
  if (dp == kAutoDegree)
    fail_config(
        "--outlier-delay reorders the batches by data-parallel-size, which auto leaves to the "
        "layout search: give --dp N (N >= 2), or drop --outlier-delay");
  // The delay weighs sequences at the layout's pipeline (its ranks' layers and memory,
  // plan::ReplicaSplitCost), so its batches are not known before pp and vpp are.
  if (raw.parallel.pipeline_parallel == kAutoDegree || raw.parallel.virtual_stages == kAutoDegree)
    fail_config(
        "--outlier-delay weighs sequences at the layout's pipeline (its stages' layers and "
        "memory), which auto leaves to the layout search: give --pp N and --vpp N, or drop "
        "--outlier-delay");
  // The delay's own checks, at the layout of dp replicas of one device each.
  Config probe = validate_except_layout(raw);
  probe.parallel.data_parallel = dp;
  probe.cluster.num_devices = probe.cluster.devices_per_node = dp;
  probe.validate();
}

Config validate_keeping_auto(const Config& raw) {
  const ParallelConfig& p = raw.parallel;
  if (p.layers_per_virtual_stage > 0 && parallel_has_auto(p))
    fail_config(
        "num-layers-per-virtual-pipeline-stage fixes the virtual stages by the pipeline size, "
        "which auto leaves to the layout search: give virtual-pipeline-model-parallel-size N (or "
        "auto) instead");
  const std::pair<int64_t, const char*> degrees[] = {
      {p.pipeline_parallel, "pipeline-model-parallel-size"},
      {p.data_parallel, "data-parallel-size"},
      {p.virtual_stages, "virtual-pipeline-model-parallel-size"},
      {p.ulysses_degree, "ulysses-degree"}};
  for (const auto& [value, key] : degrees)
    if (value != kAutoDegree && value < 1)
      fail_config("{} must be a positive integer or auto, got {}", key, value);
  Config out = validate_except_layout(raw);
  outlier_delay_check_before_search(raw);
  out.parallel.pipeline_parallel = p.pipeline_parallel;
  out.parallel.data_parallel = p.data_parallel;
  out.parallel.virtual_stages = p.virtual_stages;
  out.parallel.ulysses_degree = p.ulysses_degree;
  out.parallel.schedule = p.schedule;
  out.cluster = raw.cluster;  // 0 devices: train's world size
  out.cluster.validate();
  return out;
}

Config layout_search_base(const options::ConfigOptions& options, const Config& defaults,
                          int64_t devices, sim::LayoutSpace& space) {
  const Config raw = options::resolve_config(options, defaults, false);
  const ParallelConfig& p = raw.parallel;
  if (devices == 0) devices = raw.cluster.num_devices;
  if (devices == 0) {
    if (parallel_has_auto(p))
      fail_config("the layout search needs the device count: give --num-devices N");
    const ParallelConfig degrees = [&] {
      ParallelConfig d;
      d.pipeline_parallel = p.pipeline_parallel;
      d.data_parallel = p.data_parallel;
      d.ulysses_degree = p.ulysses_degree;
      return d;
    }();
    degrees.validate();  // positive and bounded, so their product is the device count
    devices = degrees.world_size();
  }
  ClusterConfig cluster = raw.cluster;
  cluster.num_devices = devices;
  if (cluster.devices_per_node == 0) cluster.devices_per_node = devices;
  cluster.validate();
  space.num_devices = cluster.num_devices;
  space.devices_per_node = cluster.devices_per_node;
  // Each searched layout is validated again as it is evaluated.
  Config base = validate_except_layout(raw);
  base.cluster = cluster;
  return base;
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
  const Config base = layout_search_base(options, Config{}, 0, space);
  space.threads = search_threads(args.threads);
  space.exhaustive = args.exhaustive;
  cost::CostModel cm = obs::planning_cost_model(base);
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
