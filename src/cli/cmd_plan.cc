// `infinipipe plan`: plans one global batch with the configured schedule, writes the plan as
// JSON (docs/plan-format.md) and optionally a Gantt chart, and prints a short summary.
// Also the workload options shared with `simulate` (add_workload_options).
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/layout_search_cli.h"
#include "cli/options.h"
#include "cli/workload.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "data/lengths.h"
#include "data/outlier_delay.h"
#include "data/run_datasets.h"
#include "obs/profile.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/replica_balance.h"
#include "report/gantt_svg.h"
#include "sim/simulator.h"

namespace infinipipe::cli {

namespace {

struct WorkloadArgs {
  std::string lengths;
  std::string distribution;
  int64_t iteration = 0;
  std::string replica = "0";
};

// With --outlier-delay: the batches 0..iteration of the delay over the source's order (as
// `train` draws them: data/outlier_delay.h), the last one's lengths and what the delay did.
std::pair<std::vector<int64_t>, std::string> delayed_batch(const WorkloadArgs& a, const Config& cfg,
                                                           const cost::CostModel& cm,
                                                           std::vector<int64_t> all) {
  const int64_t gbs = cfg.training.global_batch_size;
  const int64_t seq = cfg.model.seq_length;
  const bool synthetic = !a.distribution.empty();
  auto pos = std::make_shared<int64_t>(0);
  auto lengths = std::make_shared<std::vector<int64_t>>(std::move(all));
  // A synthetic stream has no end (no epoch); it is drawn again, longer, when the delay needs
  // more of it (the same seed gives the same prefix). Files and datasets repeat by epoch.
  const data::OutlierDelay::Source source = [&a, &cfg, synthetic, seq, pos, lengths] {
    const int64_t i = (*pos)++;
    if (synthetic && i >= static_cast<int64_t>(lengths->size()))
      *lengths = data::lengths_synthetic(a.distribution, 2 * (i + 1), seq,
                                         static_cast<uint64_t>(cfg.training.seed));
    const int64_t n = static_cast<int64_t>(lengths->size());
    const int64_t k = synthetic ? i : i % n;
    return data::DelayedDocument{
        {0, k}, std::min((*lengths)[static_cast<size_t>(k)], seq), synthetic ? 0 : i / n};
  };
  data::OutlierDelay delay(gbs, cfg.parallel.data_parallel, plan::replica_sequence_cost_fn(cm));
  data::OutlierDelay::Batch b;
  int64_t carrying = 0;
  for (int64_t it = 0; it <= a.iteration; ++it) {
    b = delay.next(source);
    carrying += b.released > 0;
  }
  std::vector<int64_t> batch;
  for (const data::DelayedDocument& d : b.documents) batch.push_back(d.length);
  const std::string note = fmt::format(
      "outlier delay: batch {} released {} queued outliers, flushed {}, delayed {}; {} wait; {} "
      "of batches 0..{} carried released outliers",
      a.iteration, b.released, b.flushed, b.delayed, delay.queue().size(), carrying, a.iteration);
  return {batch, note};
}

// The source's lengths, enough of a synthetic stream for `count` batches from --iteration on.
std::vector<int64_t> workload_source(const WorkloadArgs& a, const Config& cfg, int64_t count) {
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
    // Only the sequences these batches need (the delay draws more when it needs them): the
    // stream is the same whatever the iteration.
    all = data::lengths_synthetic(a.distribution, (a.iteration + count) * gbs,
                                  cfg.model.seq_length, static_cast<uint64_t>(cfg.training.seed));
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
  return all;
}

// The global batches `iteration` .. iteration + count - 1: batch it is sequences
// [it*gbs, (it+1)*gbs) of the source, wrapping around its end like Megatron's epochs do.
std::vector<std::vector<int64_t>> workload_batches(const WorkloadArgs& a, const Config& cfg,
                                                   int64_t count) {
  const std::vector<int64_t> all = workload_source(a, cfg, count);
  const int64_t gbs = cfg.training.global_batch_size;
  std::vector<std::vector<int64_t>> batches(static_cast<size_t>(count));
  const size_t n = all.size();
  for (int64_t b = 0; b < count; ++b) {
    std::vector<int64_t>& batch = batches[static_cast<size_t>(b)];
    batch.reserve(gbs);
    for (int64_t i = 0; i < gbs; ++i)
      batch.push_back(std::min(all[static_cast<size_t>(((a.iteration + b) * gbs + i) % n)],
                               cfg.model.seq_length));
  }
  return batches;
}

// The global batch of --iteration; with --outlier-delay, the delay's batch of it and its note.
std::pair<std::vector<int64_t>, std::string> workload_lengths(const WorkloadArgs& a,
                                                              const Config& cfg,
                                                              const cost::CostModel& cm) {
  if (!cfg.parallel.outlier_delay) return {workload_batches(a, cfg, 1).front(), ""};
  return delayed_batch(a, cfg, cm, workload_source(a, cfg, 1));
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

// plan.json -> plan.r3.json (a name without .json gets .r3.json appended).
std::string replica_path(const std::string& out, size_t replica) {
  const std::string ext = ".json";
  const bool json =
      out.size() >= ext.size() && out.compare(out.size() - ext.size(), ext.size(), ext) == 0;
  return fmt::format("{}.r{}.json", json ? out.substr(0, out.size() - ext.size()) : out, replica);
}

}  // namespace

// Adds --lengths / --distribution / --iteration / --replica to `cmd`; the returned loader gives
// the global batch and every replica's share of it (balanced by cost over dp replicas).
WorkloadLoader add_workload_options(CLI::App* cmd) {
  auto a = std::make_shared<WorkloadArgs>();
  cmd->add_option("--lengths", a->lengths, "text file of sequence lengths, one per line");
  cmd->add_option("--distribution", a->distribution,
                  "synthetic lengths: github | commoncrawl | uniform | fixed (seed: --seed)");
  cmd->add_option("--iteration", a->iteration, "which global batch of the workload (from 0)")
      ->capture_default_str();
  cmd->add_option("--replica", a->replica,
                  "data-parallel replica whose share is planned, or 'all' (each replica, then the "
                  "slowest against the mean)")
      ->capture_default_str();
  WorkloadLoader loader;
  loader.batches = [a](const Config& cfg, int64_t count) {
    // The delay's batches depend on dp, which a layout search varies.
    if (cfg.parallel.outlier_delay)
      fail_config(
          "--search-layout samples consecutive batches of the source and --outlier-delay "
          "reorders them by dp, which the search varies: drop one of them");
    return workload_batches(*a, cfg, count);
  };
  loader.share = [a](const Config& cfg, const cost::CostModel& cm) {
    Workload w;
    const int64_t dp = cfg.parallel.data_parallel;
    if (a->replica == "all") {
      w.replica = -1;
    } else {
      size_t used = 0;
      try {
        w.replica = std::stoll(a->replica, &used);
      } catch (...) {
        used = 0;
      }
      if (used == 0 || used != a->replica.size())
        fail_config("--replica takes a replica index or 'all', got '{}'", a->replica);
      if (w.replica < 0 || w.replica >= dp)
        fail_config("--replica {} is outside the {} data-parallel replicas", w.replica, dp);
    }
    std::tie(w.global, w.delay_note) = workload_lengths(*a, cfg, cm);
    w.shares = dp == 1 ? std::vector<std::vector<int64_t>>{w.global}
                       : plan::balance_replicas(w.global, dp, cm);
    return w;
  };
  return loader;
}

// Plans and simulates every replica's share with `schedule`; prints one line per replica and the
// slowest against the mean. Returns the plans (replica order).
std::vector<plan::PlanResult> plan_every_replica(const Config& cfg, const cost::CostModel& cm,
                                                 const Workload& w, Schedule schedule,
                                                 int32_t threads) {
  std::vector<plan::PlanResult> out;
  std::vector<double> steps;
  for (size_t r = 0; r < w.shares.size(); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    out.push_back(plan::make_plan_detailed(cfg, cm, w.shares[r], schedule, threads));
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const sim::StepResult s = sim::simulate(out.back().plan, cm, cfg);
    int64_t tokens = 0, longest = 0;
    for (int64_t l : w.shares[r]) {
      tokens += l;
      longest = std::max(longest, l);
    }
    fmt::print(
        "replica {}: {} sequences, {} tokens (longest {}), predicted step {:.3f} s, planned in "
        "{:.3f} s\n",
        r, w.shares[r].size(), tokens, longest, s.step_time, secs);
    steps.push_back(s.step_time);
  }
  fmt::print("{}\n", plan::replica_imbalance_line(plan::replica_imbalance(steps)));
  return out;
}

void add_plan_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "plan", "plan one global batch (schedule, slicing, packing, recompute) and save it");
  auto out = std::make_shared<std::string>("plan.json");
  auto svg = std::make_shared<std::string>();
  cmd->add_option("--out", *out,
                  "where to write the plan JSON ('' = do not write; with --replica all, one file "
                  "per replica: plan.r0.json, ...; with --search-layout the ranking's JSON, only "
                  "when given)")
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
  auto search = add_search_layout_options(cmd);
  auto load = add_workload_options(cmd);
  auto config = add_config_options(cmd);
  auto out_option = cmd->get_option("--out");
  cmd->callback([out, svg, threads, explain, search, load, config, out_option] {
    if (search->asked("--search-layout")) {
      if (!svg->empty() || *explain || *threads != 1)
        fail_config(
            "--svg, --explain and --planner-threads are for one plan; --search-layout ranks "
            "layouts (its threads: --search-threads): drop them or --search-layout");
      // The plan's default file name is not the ranking's: JSON only where --out says.
      layout_search_run(*search, *config, load, out_option->count() > 0 ? *out : "");
      return;
    }
    const Config cfg = resolve_config(*config);
    const cost::CostModel cm = obs::planning_cost_model(cfg);
    const Workload w = load.share(cfg, cm);
    if (!w.delay_note.empty()) fmt::print("{}\n", w.delay_note);
    if (w.replica < 0) {
      if (*explain || !svg->empty())
        fail_config("--explain and --svg show one plan: give --replica N instead of 'all'");
      const auto plans = plan_every_replica(cfg, cm, w, cfg.parallel.schedule, *threads);
      if (!out->empty()) {
        for (size_t r = 0; r < plans.size(); ++r) {
          const std::string path = replica_path(*out, r);
          plan::plan_save(plans[r].plan, path);
          fmt::print("wrote {}\n", path);
        }
      }
      return;
    }
    const auto& lengths = w.share();
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
