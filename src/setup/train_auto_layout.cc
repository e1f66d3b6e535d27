#include "setup/train_auto_layout.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_folder.h"
#include "core/error.h"
#include "core/parallel_auto.h"
#include "data/training_batches.h"
#include "plan/schedule_table.h"
#include "profile/profile.h"
#include "setup/layout_search_base.h"
#include "setup/rank_order.h"
#include "sim/layout_search.h"
#include "sim/layout_search_report.h"

namespace infinipipe::setup {
namespace {

// Where the run's training data starts: a checkpoint's position when --load resumes one (a
// Hugging Face folder starts at the beginning, as the trainer does).
struct RunStart {
  int64_t iteration = 0;
  int64_t consumed_samples = 0;
  nlohmann::json delay;  // the outlier delay's saved documents
};

RunStart run_start(const TrainingConfig& t) {
  if (t.load.empty() || (!checkpoint_find_latest(t.load) && hf_folder_is(t.load))) return {};
  const CheckpointReader reader(t.load);
  const nlohmann::json& rng = reader.rng();
  return {reader.iteration(), reader.consumed_samples(),
          rng.contains("outlier_delay") ? rng.at("outlier_delay") : nlohmann::json()};
}

int64_t searched(int64_t degree) {
  return degree == kAutoDegree ? 0 : degree;
}

// Whether the measured links put the world's ranks on two hosts or more: then the rank order
// decides what crosses them, and auto placement is chosen by the search.
bool links_span_hosts(const TrainAutoLayout& how) {
  sim::LayoutSpace world;
  world.num_devices = how.world;
  return sim::layout_links_span_hosts(how.links, world);
}

// The orders the search ranks: both for --rank-placement auto (the search keeps Megatron's
// alone where the links do not span two hosts), else the one given.
std::vector<RankOrder> searched_orders(RankPlacement p) {
  if (p == RankPlacement::auto_) return {};
  return {p == RankPlacement::pipelines ? RankOrder::pipelines : RankOrder::megatron};
}

// "a <-> b: 117 MB/s, 52 us; ...": the measured links between hosts, as the run's "link" lines
// print them (comm/mpi_links.h).
std::string links_between_hosts(const cost::HostLinkTable& links) {
  std::string out;
  for (size_t a = 0; a < links.hosts.size(); ++a)
    for (size_t b = a + 1; b < links.hosts.size(); ++b) {
      const cost::Link& l = links.between(static_cast<int64_t>(a), static_cast<int64_t>(b));
      out += fmt::format("{}{} <-> {}: {:.0f} MB/s, {:.0f} us", out.empty() ? "" : "; ",
                         links.hosts[a].name, links.hosts[b].name, l.bandwidth / 1e6,
                         l.latency_s * 1e6);
    }
  return out;
}

// `p`: the degrees, auto ones as kAutoDegree; `place`: rank the orders (auto placement, links
// across hosts).
ChosenLayout search(const std::shared_ptr<options::ConfigOptions>& options, const Config& defaults,
                    const Config& raw, const ParallelConfig& p, bool place,
                    const TrainAutoLayout& how, std::vector<cost::RankHost> hosts) {
  if (p.layers_per_virtual_stage > 0)
    fail_config(
        "--num-layers-per-virtual-pipeline-stage fixes the virtual stages by the pipeline size, "
        "which auto leaves to the search: give --vpp N (or --vpp auto) instead");
  if (p.virtual_stages == kAutoDegree &&
      plan::schedule_row(p.schedule).virtual_stages == plan::VirtualStages::none)
    fail_config(
        "--virtual-pipeline-model-parallel-size auto searches virtual stages, which schedule {} "
        "does not run: use --schedule {}, or drop the option",
        plan::schedule_name(p.schedule), plan::schedules_taking_virtual_stages());
  if (how.search_iterations < 1)
    fail_config("--search-iterations must be >= 1 (training batches to sample), got {}",
                how.search_iterations);
  sim::LayoutSpace space;
  const Config base = layout_search_base(*options, defaults, how.world, space);
  space.pp = searched(p.pipeline_parallel);
  space.dp = searched(p.data_parallel);
  space.vpp = searched(p.virtual_stages);
  space.ulysses = 1;  // the runtime runs no Ulysses (train_check_config refuses more)
  space.schedules = {p.schedule};
  space.threads = search_threads(0);
  space.rank_hosts = std::move(hosts);
  space.orders = searched_orders(raw.parallel.rank_placement);
  // At the run's own degrees only the two orders are left: plan both, so both are printed.
  const bool degrees_auto = parallel_has_auto(p);
  space.exhaustive = !degrees_auto;
  cost::CostModel cm = profile::planning_cost_model(base);
  if (!how.links.empty()) cm = cm.with_host_links(how.links);
  if (degrees_auto) outlier_delay_check_before_search(raw);
  const auto batches = train_search_batches(base, how.search_iterations);
  const sim::LayoutSearchResult r = sim::layout_search(base, cm, space, batches);
  const std::string choice = sim::layout_search_choice(r);  // ConfigError when none fits
  RankOrder order = r.best()->layout.order;
  std::vector<std::string> lines;
  if (degrees_auto)
    lines.push_back(fmt::format(
        "layout search over {} ranks (what train runs: pp x dp, ulysses 1, schedule {}): {}",
        how.world, plan::schedule_name(p.schedule), choice));
  if (place) {
    MeasuredOrders measured;
    measured.search = &r;
    measured.links = links_between_hosts(how.links);
    RankOrderQuestion question;
    question.measured = &measured;
    const RankOrderDecision d = decide_rank_order(raw, question);
    order = d.order;
    lines.push_back("rank placement auto: " + d.reason);
  }
  if (how.print) {
    for (const std::string& line : lines) {
      if (how.say)
        how.say(line);
      else
        fmt::print("{}\n", line);
    }
    std::fflush(stdout);
  }
  const sim::Layout& l = r.best()->layout;
  return {
      l.pp, l.vpp, l.ulysses, l.dp, static_cast<int64_t>(l.schedule), static_cast<int64_t>(order)};
}

}  // namespace

std::vector<std::vector<int64_t>> train_search_batches(const Config& cfg, int64_t count) {
  const TrainingConfig& t = cfg.training;
  if (!t.has_data())
    fail_config(
        "auto parallel degrees are searched on the run's own batches: pass --data-path PREFIX");
  const RunStart start = run_start(t);
  const int64_t left = t.train_iters - start.iteration;
  if (left < 1)
    fail_config(
        "--load {} resumes at iteration {}, which --train-iters {} already reached: nothing is "
        "left to train, so no layout to search; raise --train-iters",
        t.load, start.iteration, t.train_iters);
  data::TrainingBatches source(data::data_flags(cfg), t.global_batch_size,
                               static_cast<uint64_t>(t.seed), cfg.model.seq_length);
  source.resume(start.consumed_samples, start.delay);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t i = 0; i < std::min(count, left); ++i) {
    data::TrainingBatches::Batch b = source.next();
    if (b.lengths.empty())
      fail_config(
          "the global batch of iteration {} has no non-empty document (train would stop there "
          "too): check --data-path",
          start.iteration + i + 1);
    batches.push_back(std::move(b.lengths));
  }
  return batches;
}

std::shared_ptr<options::ConfigOptions> train_resolve_auto_layout(
    const std::shared_ptr<options::ConfigOptions>& options, const Config& defaults,
    const TrainAutoLayout& how) {
  // Options that do not read are reported by the run's full resolution, all in one message.
  Config raw = options::resolve_config_lenient(*options, defaults);
  // As Megatron-LM derives dp from the world and pp, an auto pp leaves a dp the options do not
  // give to the search too (and the other way round); a degree given as a number stays fixed.
  int64_t ParallelConfig::*const pair[] = {&ParallelConfig::pipeline_parallel,
                                           &ParallelConfig::data_parallel};
  for (int k = 0; k < 2; ++k) {
    if (raw.parallel.*pair[k] != kAutoDegree || raw.parallel.*pair[1 - k] == kAutoDegree) continue;
    Config probe = defaults;
    probe.parallel.*pair[1 - k] = kAutoDegree;
    if (options::resolve_config_lenient(*options, probe).parallel.*pair[1 - k] == kAutoDegree)
      raw.parallel.*pair[1 - k] = kAutoDegree;
  }
  const bool placement_auto = raw.parallel.rank_placement == RankPlacement::auto_;
  if (how.search_iterations_given && !parallel_has_auto(raw.parallel) &&
      !(placement_auto && raw.cluster.measure_links))
    fail_config(
        "--search-iterations sizes the layout search of auto degrees, and with --measure-links "
        "that of --rank-placement auto: add --pp auto (or --dp / --vpp / --ulysses-degree "
        "auto), or --rank-placement auto --measure-links, or drop it");
  const bool place = placement_auto && links_span_hosts(how);
  if (!parallel_has_auto(raw.parallel) && !place) return options;
  // The search reads only valid options; at the run's own degrees, those options give them
  // (dp derived from the world as Megatron-LM does).
  Config resolved = options::resolve_config(*options, defaults, false);
  if (!parallel_has_auto(raw.parallel)) resolved.validate();  // vpp from layers per stage, say
  const ParallelConfig& p = parallel_has_auto(raw.parallel) ? raw.parallel : resolved.parallel;
  ChosenLayout chosen{};
  std::vector<cost::RankHost> hosts = how.hosts ? how.hosts() : std::vector<cost::RankHost>{};
  if (how.searcher) chosen = search(options, defaults, raw, p, place, how, std::move(hosts));
  if (how.share) how.share(chosen);
  auto out = std::make_shared<options::ConfigOptions>(*options);
  if (place)
    out->flags.emplace_back("rank-placement", rank_order_name(static_cast<RankOrder>(chosen[5])));
  const std::pair<int64_t, const char*> degrees[] = {
      {p.pipeline_parallel, "pipeline-model-parallel-size"},
      {p.virtual_stages, "virtual-pipeline-model-parallel-size"},
      {p.ulysses_degree, "ulysses-degree"},
      {p.data_parallel, "data-parallel-size"}};
  for (size_t i = 0; i < 4; ++i)
    if (degrees[i].first == kAutoDegree)
      out->flags.emplace_back(degrees[i].second, std::to_string(chosen[i]));
  return out;
}

}  // namespace infinipipe::setup
