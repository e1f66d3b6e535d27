// `infinipipe plan`: plans one global batch with the configured schedule, writes the plan as
// JSON (docs/plan-format.md) and optionally a Gantt chart, and prints a short summary. The
// workload options it shares with `simulate` are in workload.cc.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/layout_search_cli.h"
#include "cli/workload.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "options/options.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "profile/profile.h"
#include "report/gantt_svg.h"
#include "setup/plan_rank_order.h"
#include "sim/rank_order_choice.h"
#include "sim/simulator.h"

namespace infinipipe::cli {

namespace {

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
  auto config = options::add_config_options(cmd);
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
    const Config given = options::resolve_config(*config);
    const cost::CostModel cm = profile::planning_cost_model(given);
    const Workload w = load.share(given, cm);
    if (!w.delay_note.empty()) fmt::print("{}\n", w.delay_note);
    const Config cfg =
        setup::plan_rank_placement(given, cm, w.shares, given.parallel.schedule, *threads);
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
    const cost::CostModel mine = sim::replica_cost_model(cm, cfg, w.replica);
    const auto t0 = std::chrono::steady_clock::now();
    plan::PlanResult r =
        plan::make_plan_detailed(cfg, mine, lengths, cfg.parallel.schedule, *threads);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const sim::StepResult s = sim::simulate(r.plan, mine, cfg);
    print_summary(cfg, r, s, secs);
    const std::string links = setup::replica_links_line(cfg, cm, w.replica);
    if (!links.empty()) fmt::print("  {}\n", links);
    if (*explain) {
      plan::explain_chosen_plan(r.explain, r.plan, cfg, mine);
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
