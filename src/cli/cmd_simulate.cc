// `infinipipe simulate`: predicts one step of the configured schedule (or of a saved plan), and
// with --compare prints every schedule side by side for the same batch, each baseline tuned to
// its own best setting, as a markdown table.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "obs/profile.h"
#include "plan/budget_error.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "sim/simulator.h"
#include "sim/ulysses.h"

namespace infinipipe::cli {

// Defined in cmd_plan.cc: (global batch, this replica's share).
using Workload = std::pair<std::vector<int64_t>, std::vector<int64_t>>;
std::function<Workload(const Config&, const cost::CostModel&)> add_workload_options(CLI::App* cmd);

namespace {

struct Row {
  std::string name;
  bool ok = false;
  std::string note;  // why not, when !ok
  double step = 0, tokens_per_s = 0, bubble = 0, mfu = 0, plan_s = 0;
  int64_t peak = 0;
  std::string setting;
};

int64_t max_of(const std::vector<int64_t>& v) {
  int64_t m = 0;
  for (int64_t x : v) m = std::max(m, x);
  return m;
}

Row pipeline_row(const Config& cfg, const cost::CostModel& cm, const std::vector<int64_t>& lengths,
                 Schedule s) {
  Row row;
  row.name = schedule_name(s);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const plan::PlanResult r = plan::make_plan_detailed(cfg, cm, lengths, s);
    const sim::StepResult st = sim::simulate(r.plan, cm, cfg);
    row.ok = !st.oom;
    row.step = st.step_time;
    row.tokens_per_s = st.tokens_per_second * static_cast<double>(cfg.parallel.data_parallel);
    row.bubble = st.bubble_ratio_mean;
    row.mfu = st.mfu;
    row.peak = max_of(st.peak_bytes);
    row.setting = r.knobs.describe();
    if (st.oom) row.note = "OOM in simulation";
  } catch (const plan::BudgetError& e) {
    row.note = fmt::format("OOM (needs {})", format_bytes(e.least_budget()));
  } catch (const ConfigError& e) {
    row.note = fmt::format("n/a: {}", e.what());
  } catch (const Error& e) {
    row.note = fmt::format("failed: {}", e.what());
  }
  row.plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return row;
}

Row ulysses_row(const Config& cfg, const cost::CostModel& cm, const std::vector<int64_t>& batch) {
  Row row;
  row.name = "ulysses";
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const sim::UlyssesResult u = sim::simulate_ulysses(cm, cfg, batch);
    row.ok = !u.oom;
    row.step = u.step_time_s;
    row.tokens_per_s = u.tokens_per_s;
    row.mfu = u.mfu;
    row.peak = u.peak_memory_bytes;
    row.setting = fmt::format("sp={}, dp={}, mb={}K tok, {}", u.setting.sp_degree, u.dp_degree,
                              u.setting.micro_batch_tokens / 1024,
                              u.setting.full_recompute ? "full recompute" : "no recompute");
    if (u.oom) row.note = u.reason.empty() ? "OOM" : fmt::format("OOM: {}", u.reason);
  } catch (const Error& e) {
    row.note = fmt::format("n/a: {}", e.what());
  }
  row.plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return row;
}

void print_compare(const Config& cfg, const std::vector<int64_t>& lengths,
                   const std::vector<Row>& rows) {
  int64_t tokens = 0, longest = 0;
  for (int64_t l : lengths) {
    tokens += l;
    longest = std::max(longest, l);
  }
  fmt::print(
      "batch: {} sequences, {} tokens, longest {}; {} x {} = {} devices; pp {}, ulysses {}, "
      "dp {}; budget {}\n\n",
      lengths.size(), tokens, longest, cfg.cluster.num_nodes(), cfg.cluster.devices_per_node,
      cfg.cluster.num_devices, cfg.parallel.pipeline_parallel, cfg.parallel.ulysses_degree,
      cfg.parallel.data_parallel,
      cfg.training.memory_budget > 0 ? format_bytes(cfg.training.memory_budget) : "device memory");
  const Row* epp = nullptr;
  for (const Row& r : rows)
    if (r.name == "epp" && r.ok) epp = &r;
  fmt::print(
      "| schedule | step time | tokens/s | EPP speedup | bubble | peak memory (max rank) | "
      "MFU | tuned setting |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|---:|---|\n");
  for (const Row& r : rows) {
    if (!r.ok) {
      fmt::print("| {} | {} | – | – | – | {} | – | {} |\n", r.name, r.note,
                 r.peak > 0 ? format_bytes(r.peak) : "–", r.setting.empty() ? "–" : r.setting);
      continue;
    }
    const std::string speedup =
        epp ? fmt::format("{:.2f}x", epp->tokens_per_s / r.tokens_per_s) : "–";
    const std::string bubble = r.name == "ulysses" ? "–" : fmt::format("{:.1f}%", 100 * r.bubble);
    fmt::print("| {} | {:.3f} s | {:.0f} | {} | {} | {} | {:.1f}% | {} |\n", r.name, r.step,
               r.tokens_per_s, speedup, bubble, format_bytes(r.peak), 100 * r.mfu, r.setting);
  }
  fmt::print("\n(pipeline rows: one data-parallel replica's share, tokens/s x dp; planning took");
  for (const Row& r : rows) fmt::print(" {} {:.2f}s", r.name, r.plan_s);
  fmt::print(")\n");
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "simulate", "predict a step: the configured schedule, a saved --plan, or --compare all");
  auto compare = std::make_shared<bool>(false);
  auto plan_file = std::make_shared<std::string>();
  cmd->add_flag("--compare", *compare,
                "every schedule (epp, 1f1b, interleaved, gpipe, seq1f1b, ulysses) side by side");
  cmd->add_option("--plan", *plan_file, "simulate this saved plan instead of planning");
  auto load = add_workload_options(cmd);
  auto config = add_config_options(cmd);
  cmd->callback([compare, plan_file, load, config] {
    const Config cfg = resolve_config(*config);
    const cost::CostModel cm = obs::planning_cost_model(cfg);
    if (!plan_file->empty()) {
      if (*compare) fail_config("--plan and --compare exclude each other");
      const plan::Plan p = plan::plan_load(*plan_file);
      const sim::StepResult s = sim::simulate(p, cm, cfg, sim::SimOptions{false, true});
      fmt::print("{} plan {}: step {:.3f} s, {:.0f} tokens/s, bubble {:.1f}%, MFU {:.1f}%{}\n",
                 p.schedule, *plan_file, s.step_time, s.tokens_per_second,
                 100 * s.bubble_ratio_mean, 100 * s.mfu, s.oom ? ", OUT OF MEMORY" : "");
      return;
    }
    const auto [global, lengths] = load(cfg, cm);
    if (!*compare) {
      const Row r = pipeline_row(cfg, cm, lengths, cfg.parallel.schedule);
      print_compare(cfg, lengths, {r});
      return;
    }
    std::vector<Row> rows;
    for (Schedule s : {Schedule::epp, Schedule::one_f_one_b, Schedule::interleaved, Schedule::gpipe,
                       Schedule::seq1f1b})
      rows.push_back(pipeline_row(cfg, cm, lengths, s));
    rows.push_back(ulysses_row(cfg, cm, global));
    print_compare(cfg, lengths, rows);
  });
}

}  // namespace infinipipe::cli
