// `infinipipe plan`: plans one global batch with the configured schedule, writes the plan as
// JSON (docs/plan-format.md) and optionally a Gantt chart, and prints a short summary.
// Also the workload options shared with `simulate` (add_workload_options).
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "data/lengths.h"
#include "data/run_datasets.h"
#include "obs/profile.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "report/gantt_svg.h"
#include "sim/simulator.h"

namespace infinipipe::cli {

using Workload = std::pair<std::vector<int64_t>, std::vector<int64_t>>;  // (global batch, share)

namespace {

struct WorkloadArgs {
  std::string lengths;
  std::string distribution;
  int64_t iteration = 0;
  int64_t replica = 0;
};

// The global batch of `iteration`: sequences [it*gbs, (it+1)*gbs) of the source, wrapping
// around its end like Megatron's epochs do.
std::vector<int64_t> workload_lengths(const WorkloadArgs& a, const Config& cfg) {
  const bool data = !cfg.training.data_path.empty();
  const int sources = data + !a.lengths.empty() + !a.distribution.empty();
  if (sources != 1)
    fail_config(
        "give exactly one workload: --lengths FILE, --data-path PREFIX or --distribution "
        "github|commoncrawl|uniform|fixed (got {})",
        sources);
  if (a.iteration < 0) fail_config("--iteration must be >= 0, got {}", a.iteration);
  const int64_t gbs = cfg.training.global_batch_size;
  std::vector<int64_t> all;
  if (!a.distribution.empty()) {
    // Only the sequences this batch needs: the stream is the same whatever the iteration.
    all = data::lengths_synthetic(a.distribution, (a.iteration + 1) * gbs, cfg.model.seq_length,
                                  static_cast<uint64_t>(cfg.training.seed));
  } else if (data) {
    if (data::blend_words(cfg.training.data_path).size() != 1) {
      fail_config(
          "plan --data-path takes one dataset PREFIX (its documents in order), not the blend "
          "'{}'; plan one dataset of the blend at a time",
          cfg.training.data_path);
    }
    all = data::lengths_from_indexed(cfg.training.data_path, cfg.model.seq_length);
    all.erase(std::remove(all.begin(), all.end(), 0), all.end());  // empty documents
    if (all.empty()) fail("dataset {} has no non-empty document", cfg.training.data_path);
  } else {
    all = data::lengths_from_text(a.lengths);
  }
  std::vector<int64_t> batch;
  batch.reserve(gbs);
  const size_t n = all.size();
  for (int64_t i = 0; i < gbs; ++i)
    batch.push_back(
        std::min(all[static_cast<size_t>((a.iteration * gbs + i) % n)], cfg.model.seq_length));
  return batch;
}

void print_summary(const Config& cfg, const plan::PlanResult& r, const sim::StepResult& s,
                   double plan_seconds) {
  const plan::Plan& p = r.plan;
  int64_t longest = 0;
  for (int64_t l : p.seq_lengths) longest = std::max(longest, l);
  fmt::print("{} plan: {} sequences, {} tokens (longest {}), pp {} x vpp {}, dp {}, ulysses {}\n",
             p.schedule, p.seq_lengths.size(), p.num_tokens(), longest, p.pp, p.vpp,
             cfg.parallel.data_parallel, cfg.parallel.ulysses_degree);
  int splits = 0, hybrids = 0, batched = 0;
  for (const plan::Chunk& c : p.chunks) {
    switch (c.kind()) {
      case plan::ChunkKind::split:
        ++splits;
        break;
      case plan::ChunkKind::hybrid:
        ++hybrids;
        break;
      case plan::ChunkKind::batched:
        ++batched;
        break;
    }
  }
  fmt::print("  chunks: {} ({} split, {} hybrid, {} batched), {} pipeline(s)\n", p.chunks.size(),
             splits, hybrids, batched, p.num_pipelines());
  fmt::print("  setting: {} ({} candidates searched in {:.3f} s)\n", r.knobs.describe(),
             r.knobs.candidates, plan_seconds);
  if (r.knobs.recompute_layers < 0)
    fmt::print("  adaptive recompute: {:.3f} s of recompute on the critical waves (gap {:.2f}%)\n",
               r.knobs.recompute_time, 100 * r.knobs.recompute_gap);
  fmt::print(
      "  predicted step {:.3f} s, {:.0f} tokens/s per replica, bubble {:.1f}%, MFU {:.1f}%\n",
      s.step_time, s.tokens_per_second, 100 * s.bubble_ratio_mean, 100 * s.mfu);
  std::string peaks;
  for (size_t i = 0; i < s.peak_bytes.size(); ++i)
    peaks += fmt::format("{}{}", i ? ", " : "", format_bytes(s.peak_bytes[i]));
  fmt::print("  peak memory per rank: {} (budget {})\n", peaks, format_bytes(p.memory_budget));
}

}  // namespace

// Adds --lengths / --distribution / --iteration / --replica to `cmd`; the returned loader gives
// the global batch and this replica's share of it (balanced by cost over dp replicas).
std::function<Workload(const Config&, const cost::CostModel&)> add_workload_options(CLI::App* cmd) {
  auto a = std::make_shared<WorkloadArgs>();
  cmd->add_option("--lengths", a->lengths, "text file of sequence lengths, one per line");
  cmd->add_option("--distribution", a->distribution,
                  "synthetic lengths: github | commoncrawl | uniform | fixed (seed: --seed)");
  cmd->add_option("--iteration", a->iteration, "which global batch of the workload (from 0)")
      ->capture_default_str();
  cmd->add_option("--replica", a->replica, "data-parallel replica whose share is planned")
      ->capture_default_str();
  return [a](const Config& cfg, const cost::CostModel& cm) {
    const auto batch = workload_lengths(*a, cfg);
    if (a->replica < 0 || a->replica >= cfg.parallel.data_parallel)
      fail_config("--replica {} is outside the {} data-parallel replicas", a->replica,
                  cfg.parallel.data_parallel);
    if (cfg.parallel.data_parallel == 1) return Workload{batch, batch};
    return Workload{batch,
                    plan::balance_replicas(batch, cfg.parallel.data_parallel, cm)[a->replica]};
  };
}

void add_plan_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "plan", "plan one global batch (schedule, slicing, packing, recompute) and save it");
  auto out = std::make_shared<std::string>("plan.json");
  auto svg = std::make_shared<std::string>();
  cmd->add_option("--out", *out, "where to write the plan JSON ('' = do not write)")
      ->capture_default_str();
  cmd->add_option("--svg", *svg, "also write the simulated step as an SVG Gantt chart");
  auto threads = std::make_shared<int32_t>(1);
  cmd->add_option("--planner-threads", *threads,
                  "threads evaluating the EPP search's candidates side by side (0 = every core); "
                  "the plan is the same for any count")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  auto explain = std::make_shared<bool>(false);
  cmd->add_flag("--explain", *explain,
                "print why the plan is what it is (candidates tried, cuts, packs, recompute) and "
                "save it in the plan JSON's \"explain\" field");
  auto load = add_workload_options(cmd);
  auto config = add_config_options(cmd);
  cmd->callback([out, svg, threads, explain, load, config] {
    const Config cfg = resolve_config(*config);
    const cost::CostModel cm = obs::planning_cost_model(cfg);
    const auto lengths = load(cfg, cm).second;
    const auto t0 = std::chrono::steady_clock::now();
    plan::PlanResult r = plan::make_plan_detailed(cfg, cm, lengths, cfg.parallel.schedule, *threads);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const sim::StepResult s = sim::simulate(r.plan, cm, cfg);
    print_summary(cfg, r, s, secs);
    if (*explain) {
      plan::explain_chosen_plan(r.explain, r.plan, cfg, cm);
      fmt::print("{}", plan::explain_text(r.explain));
    }
    if (!out->empty()) {
      if (*explain) {
        const nlohmann::json why = plan::explain_to_json(r.explain);
        plan::plan_save(r.plan, *out, &why);
      } else {
        plan::plan_save(r.plan, *out);
      }
      fmt::print("wrote {}\n", *out);
    }
    if (!svg->empty()) {
      report::gantt_svg_save(s, *svg);
      fmt::print("wrote {}\n", *svg);
    }
  });
}

}  // namespace infinipipe::cli
