// `infinipipe simulate`: predicts one step of the configured schedule (or of a saved plan), and
// with --compare prints every schedule side by side for the same batch as a markdown table:
// --baselines tuned tunes each baseline to its own best setting in EPP's layout; --baselines paper
// runs the InfiniPipe paper's baselines as its §V-A configured them (sim/baseline_*.h).
#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/layout_search_cli.h"
#include "cli/workload.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "options/options.h"
#include "plan/budget_error.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/schedule_table.h"
#include "profile/profile.h"
#include "setup/plan_rank_order.h"
#include "sim/baseline_deepspeed.h"
#include "sim/baseline_flexsp.h"
#include "sim/baseline_megatron.h"
#include "sim/rank_order_choice.h"
#include "sim/simulator.h"
#include "sim/ulysses.h"

namespace infinipipe::cli {

namespace {

struct Row {
  std::string name;
  bool ok = false;
  std::string note;  // why not, when !ok
  double step = 0, tokens_per_s = 0, bubble = 0, mfu = 0, plan_s = 0;
  int64_t peak = 0;
  std::string setting;
  std::string breakdown;     // pipeline rows: where the slowest rank's step goes
  sim::TimeBreakdown parts;  // the paper's four parts of `step`
  double solve_min_s = 0, solve_max_s = 0;  // a per-batch solve its paper reports (not plan_s)
  std::string solve_source;
};

// The paper's four parts (sim::TimeBreakdown) of a pipeline step, on the rank that finishes
// last: its exposed ZeRO-3 collectives and step-end gradient sync, all-to-alls, idle time
// (bubbles, waiting on transfers) and the rest of its busy time.
sim::TimeBreakdown pipeline_parts(const sim::StepResult& st) {
  size_t k = 0;
  for (size_t i = 0; i < st.busy_time.size(); ++i)
    if (st.busy_time[i] + st.dp_sync_time[i] > st.busy_time[k] + st.dp_sync_time[k]) k = i;
  sim::TimeBreakdown p;
  p.zero = st.zero3_time[k] + st.dp_sync_time[k];
  p.a2a = st.alltoall_time[k];
  p.others = st.compute_time[k];
  p.bubble_p2p = st.step_time - p.zero - p.a2a - p.others;
  return p;
}

// The rank that finishes last: its compute, communication and idle time (what --breakdown prints).
std::string step_breakdown(const sim::StepResult& st) {
  size_t k = 0;
  for (size_t i = 0; i < st.busy_time.size(); ++i)
    if (st.busy_time[i] + st.dp_sync_time[i] > st.busy_time[k] + st.dp_sync_time[k]) k = i;
  const double idle = st.step_time - st.busy_time[k] - st.dp_sync_time[k];
  return fmt::format("| {} | {:.3f} s | {:.3f} s | {:.3f} s | {:.3f} s | {:.3f} s |", k,
                     st.compute_time[k], st.alltoall_time[k], st.zero3_time[k], st.dp_sync_time[k],
                     idle);
}

int64_t max_of(const std::vector<int64_t>& v) {
  int64_t m = 0;
  for (int64_t x : v) m = std::max(m, x);
  return m;
}

Row pipeline_row(const Config& cfg, const cost::CostModel& cm, const std::vector<int64_t>& lengths,
                 Schedule s) {
  Row row;
  row.name = plan::schedule_name(s);
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
    row.breakdown = step_breakdown(st);
    row.parts = pipeline_parts(st);
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
    row.parts = {.zero = u.zero_exposed_s,
                 .a2a = u.alltoall_time_s,
                 .bubble_p2p = 0,
                 .others = u.compute_time_s + u.optimizer_time_s};
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

// A setting the user gave by flag that cannot run is their error, not a row's "n/a".
Row baseline_row(const char* name, const std::function<sim::BaselineResult()>& run,
                 bool user_setting = false) {
  Row row;
  row.name = name;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    const sim::BaselineResult b = run();
    row.ok = !b.oom;
    row.step = b.step_time_s;
    row.tokens_per_s = b.tokens_per_s;
    row.mfu = b.mfu;
    row.peak = b.peak_memory_bytes;
    row.parts = b.parts;
    row.solve_min_s = b.solve_min_s;
    row.solve_max_s = b.solve_max_s;
    row.solve_source = b.solve_source;
    row.setting = fmt::format("{}; compute {:.2f} s, exposed communication {:.2f} s", b.setting,
                              b.compute_time_s, b.comm_exposed_s);
    if (b.oom) row.note = "OOM";
  } catch (const ConfigError& e) {
    if (user_setting) throw;
    row.note = fmt::format("n/a: {}", e.what());
  } catch (const Error& e) {
    row.note = fmt::format("n/a: {}", e.what());
  }
  row.plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return row;
}

void print_compare(const Config& cfg, const cost::CostModel& cm,
                   const std::vector<int64_t>& lengths, const std::vector<Row>& rows) {
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
      cfg.training.memory_budget > 0
          ? format_bytes(cfg.training.memory_budget)
          : fmt::format("{} (the device's {} less {} reserved, docs/cost-model.md \"Usable "
                        "memory\")",
                        format_bytes(cost::usable_memory_bytes(cm.device())),
                        format_bytes(cm.device().memory_bytes),
                        format_bytes(cm.device().reserved_memory_bytes)));
  const Row* epp = nullptr;
  for (const Row& r : rows)
    if (r.name == "epp" && r.ok) epp = &r;
  fmt::print(
      "| schedule | step time | tokens/s | EPP speedup | bubble | peak memory (max rank) | "
      "MFU | setting |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|---:|---|\n");
  for (const Row& r : rows) {
    if (!r.ok) {
      fmt::print("| {} | {} | – | – | – | {} | – | {} |\n", r.name, r.note,
                 r.peak > 0 ? format_bytes(r.peak) : "–", r.setting.empty() ? "–" : r.setting);
      continue;
    }
    const std::string speedup =
        epp ? fmt::format("{:.2f}x", epp->tokens_per_s / r.tokens_per_s) : "–";
    const bool pipeline = r.name == "epp" || r.name == "1f1b" || r.name == "interleaved" ||
                          r.name == "gpipe" || r.name == "seq1f1b";
    const std::string bubble = pipeline ? fmt::format("{:.1f}%", 100 * r.bubble) : "–";
    fmt::print("| {} | {:.3f} s | {:.0f} | {} | {} | {} | {:.1f}% | {} |\n", r.name, r.step,
               r.tokens_per_s, speedup, bubble, format_bytes(r.peak), 100 * r.mfu, r.setting);
  }
  fmt::print("\n(pipeline rows: one data-parallel replica's share, tokens/s x dp; planning took");
  for (const Row& r : rows) fmt::print(" {} {:.2f}s", r.name, r.plan_s);
  fmt::print(")\n");
}

// The InfiniPipe paper's case-study split (§V-C, Fig. 8) of every row's step.
void print_parts(const std::vector<Row>& rows) {
  fmt::print(
      "\nWhere each step goes, in the paper's four parts (§V-C, Fig. 8; docs/cost-model.md, "
      "\"The paper's four parts\"), and beside it a plan solved per batch, which runs beside "
      "the training and is not in the step:\n\n| schedule | ZeRO | A2A | Bubble & P2P | Others | "
      "step | solve per batch |\n|---|---:|---:|---:|---:|---:|---|\n");
  for (const Row& r : rows) {
    if (!r.ok) continue;
    const sim::TimeBreakdown& p = r.parts;
    std::string solve = "–";
    if (r.name == "epp")
      solve = "its planning time above (planned ahead, beside the training)";
    else if (r.solve_max_s > 0)
      solve = fmt::format("{:g}–{:g} s ({})", r.solve_min_s, r.solve_max_s, r.solve_source);
    fmt::print("| {} | {:.3f} s | {:.3f} s | {:.3f} s | {:.3f} s | {:.3f} s | {} |\n", r.name,
               p.zero, p.a2a, p.bubble_p2p, p.others, r.step, solve);
  }
}

void write_compare_json(const std::string& path, const std::vector<int64_t>& lengths,
                        const std::vector<Row>& rows) {
  nlohmann::json out;
  int64_t tokens = 0;
  for (int64_t l : lengths) tokens += l;
  out["sequences"] = lengths.size();
  out["tokens"] = tokens;
  out["rows"] = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json j = {{"schedule", r.name}, {"ok", r.ok}, {"setting", r.setting}};
    if (!r.ok) {
      j["note"] = r.note;
    } else {
      j["step_s"] = r.step;
      j["tokens_per_s"] = r.tokens_per_s;
      j["mfu"] = r.mfu;
      j["peak_bytes"] = r.peak;
      j["parts_s"] = {{"zero", r.parts.zero},
                      {"a2a", r.parts.a2a},
                      {"bubble_p2p", r.parts.bubble_p2p},
                      {"others", r.parts.others}};
      j["plan_s"] = r.plan_s;
      if (r.solve_max_s > 0)
        j["solve_s"] = {{"min", r.solve_min_s}, {"max", r.solve_max_s}, {"source", r.solve_source}};
    }
    out["rows"].push_back(std::move(j));
  }
  std::ofstream f(path);
  if (!(f << out.dump(2) << "\n")) fail("simulate --json: cannot write {}", path);
}

void print_breakdown(const std::vector<Row>& rows) {
  fmt::print(
      "\nTime of each pipeline row's busiest rank: compute (with recompute and β1), Ulysses "
      "all-to-alls, exposed ZeRO-3 gathers and reduce-scatters, data-parallel all-reduce, idle "
      "(bubbles)\n\n| schedule | rank | compute | all-to-all | ZeRO-3 | dp all-reduce | idle |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows)
    if (!r.breakdown.empty()) fmt::print("| {} {}\n", r.name, r.breakdown);
}

// The flags that configure `--baselines paper` (0 or -1: the paper's setting for this model).
struct PaperFlags {
  std::string baselines = "tuned";
  int64_t megatron_tp = 0, megatron_cp = 0, megatron_recompute = -1;
  int64_t deepspeed_sp = 0, deepspeed_recompute = -1;
  int64_t seq1f1b_chunks = 4;         // --seq1f1b-segments, the Seq1F1B paper's word
  std::vector<CLI::Option*> options;  // all of the above but --baselines
};

std::shared_ptr<PaperFlags> add_paper_flags(CLI::App* cmd) {
  auto f = std::make_shared<PaperFlags>();
  cmd->add_option("--baselines", f->baselines,
                  "with --compare: 'tuned' (each baseline tuned in EPP's layout) or 'paper' (the "
                  "InfiniPipe paper's baselines as its evaluation configured them)")
      ->check(CLI::IsMember({"paper", "tuned"}));
  const std::string paper = " (--baselines paper; default: the paper's for this model size)";
  f->options = {
      cmd->add_option("--megatron-tp", f->megatron_tp, "Megatron-LM tensor parallel" + paper)
          ->check(CLI::PositiveNumber),
      cmd->add_option("--megatron-cp", f->megatron_cp, "Megatron-LM context parallel" + paper)
          ->check(CLI::PositiveNumber),
      cmd->add_option("--megatron-recompute-layers", f->megatron_recompute,
                      "Megatron-LM layers fully recomputed" + paper)
          ->check(CLI::NonNegativeNumber),
      cmd->add_option("--deepspeed-sp", f->deepspeed_sp,
                      "DeepSpeed-Ulysses sequence-parallel degree, may span nodes" + paper)
          ->check(CLI::PositiveNumber),
      cmd->add_option("--deepspeed-recompute-layers", f->deepspeed_recompute,
                      "DeepSpeed layers recomputed (default: all)")
          ->check(CLI::NonNegativeNumber),
      cmd->add_option("--seq1f1b-segments", f->seq1f1b_chunks,
                      "Seq1F1B: equal-cost chunks each packed micro-batch is cut into (the "
                      "paper's segments; --baselines paper; default 4)")
          ->check(CLI::PositiveNumber),
  };
  return f;
}

// `mine`: the model the replica's pipeline plans with (its own links on measured host links);
// the other systems' rows use `cm`, their own layouts.
std::vector<Row> paper_rows(const Config& cfg, const cost::CostModel& cm,
                            const cost::CostModel& mine, const std::vector<int64_t>& global,
                            const std::vector<int64_t>& lengths, const PaperFlags& f) {
  std::vector<Row> rows;
  rows.push_back(pipeline_row(cfg, mine, lengths, Schedule::epp));
  // Seq1F1B as its paper runs it: micro-batches packed to the longest sequence, each cut into a
  // fixed number of equal-cost chunks (the paper's segments).
  Config seq = cfg;
  seq.parallel.seq1f1b_slices = f.seq1f1b_chunks;
  seq.parallel.micro_batch_size = 1;
  rows.push_back(pipeline_row(seq, mine, lengths, Schedule::seq1f1b));
  sim::MegatronSetting mg = sim::megatron_paper_setting(cfg.model);
  if (f.megatron_tp > 0) mg.tp = f.megatron_tp;
  if (f.megatron_cp > 0) mg.cp = f.megatron_cp;
  if (f.megatron_recompute >= 0) mg.recompute_layers = f.megatron_recompute;
  rows.push_back(baseline_row(
      "megatron", [&] { return sim::simulate_megatron(cm, cfg, global, mg); },
      f.megatron_tp > 0 || f.megatron_cp > 0 || f.megatron_recompute >= 0));
  sim::DeepSpeedSetting ds = sim::deepspeed_paper_setting(cfg.model, cfg.cluster.num_devices);
  if (f.deepspeed_sp > 0) ds.sp = f.deepspeed_sp;
  if (f.deepspeed_recompute >= 0) ds.recompute_layers = f.deepspeed_recompute;
  rows.push_back(baseline_row(
      "deepspeed", [&] { return sim::simulate_deepspeed(cm, cfg, global, ds); },
      f.deepspeed_sp > 0 || f.deepspeed_recompute >= 0));
  rows.push_back(baseline_row("flexsp", [&] {
    return sim::simulate_flexsp(cm, cfg, global, sim::flexsp_paper_setting(cfg.model)).result;
  }));
  return rows;
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "simulate", "predict a step: the configured schedule, a saved --plan, or --compare all");
  auto compare = std::make_shared<bool>(false);
  auto plan_file = std::make_shared<std::string>();
  cmd->add_flag("--compare", *compare,
                "every schedule side by side: epp and the baselines of --baselines");
  cmd->add_option("--plan", *plan_file, "simulate this saved plan instead of planning");
  auto json_out = std::make_shared<std::string>();
  cmd->add_option("--json", *json_out,
                  "with --compare: also write every row (step, tokens/s, peak, the paper's four "
                  "parts of the step) to this JSON file");
  auto breakdown = std::make_shared<bool>(false);
  cmd->add_flag("--breakdown", *breakdown,
                "after the table: compute, all-to-all, ZeRO-3, all-reduce and idle seconds of "
                "each pipeline row's busiest rank");
  auto paper = add_paper_flags(cmd);
  auto search = add_search_layout_options(cmd);
  auto search_out = std::make_shared<std::string>();
  CLI::Option* search_out_option =
      cmd->add_option("--out", *search_out, "with --search-layout: write the ranking as JSON");
  auto load = add_workload_options(cmd);
  auto config = options::add_config_options(cmd);
  cmd->callback([cmd, compare, plan_file, json_out, breakdown, paper, search, search_out,
                 search_out_option, load, config] {
    if (!json_out->empty() && !*compare)
      fail_config("simulate --json writes the --compare table: add --compare");
    if (search->asked("--search-layout")) {
      const bool baselines = cmd->get_option("--baselines")->count() > 0 ||
                             std::any_of(paper->options.begin(), paper->options.end(),
                                         [](const CLI::Option* o) { return o->count() > 0; });
      if (*compare || !plan_file->empty() || *breakdown || baselines)
        fail_config(
            "--search-layout ranks layouts; --compare, --baselines, --plan and --breakdown "
            "are for one layout: drop them or --search-layout");
      layout_search_run(*search, *config, load, *search_out);
      return;
    }
    if (search_out_option->count() > 0)
      fail_config("simulate --out writes the --search-layout ranking: add --search-layout");
    const Config given = options::resolve_config(*config);
    const cost::CostModel cm = profile::planning_cost_model(given);
    const bool paper_flags = std::any_of(paper->options.begin(), paper->options.end(),
                                         [](const CLI::Option* o) { return o->count() > 0; });
    if (paper_flags && (paper->baselines != "paper" || !*compare))
      fail_config(
          "--megatron-*, --deepspeed-* and --seq1f1b-segments configure `--compare --baselines "
          "paper` only: add those two flags or drop these");
    if (!plan_file->empty()) {
      if (*compare) fail_config("--plan and --compare exclude each other");
      const Config& cfg = given;
      const int64_t replica = load.replica(cfg);
      if (!cm.host_links().empty() &&
          (replica < 0 || cfg.parallel.rank_placement == RankPlacement::auto_))
        fail_config(
            "--plan on measured host links is one replica's plan in one rank order: give "
            "--replica N and --rank-placement megatron or pipelines");
      const cost::CostModel mine = sim::replica_cost_model(cm, cfg, std::max<int64_t>(replica, 0));
      const plan::Plan p = plan::plan_load(*plan_file);
      const sim::StepResult s = sim::simulate(p, mine, cfg, sim::SimOptions{false, true});
      fmt::print("{} plan {}: step {:.3f} s, {:.0f} tokens/s, bubble {:.1f}%, MFU {:.1f}%{}\n",
                 p.schedule, *plan_file, s.step_time, s.tokens_per_second,
                 100 * s.bubble_ratio_mean, 100 * s.mfu, s.oom ? ", OUT OF MEMORY" : "");
      if (*breakdown) {
        Row row;
        row.name = p.schedule;
        row.ok = true;
        row.breakdown = step_breakdown(s);
        row.parts = pipeline_parts(s);
        print_breakdown({row});
      }
      return;
    }
    const Workload w = load.share(given, cm);
    if (!w.delay_note.empty()) fmt::print("{}\n", w.delay_note);
    const Config cfg = setup::plan_rank_placement(given, cm, w.shares, given.parallel.schedule);
    if (w.replica < 0) {
      if (*compare || *breakdown)
        fail_config(
            "--compare and --breakdown show one replica: give --replica N instead of 'all'");
      plan_every_replica(cfg, cm, w, cfg.parallel.schedule);
      return;
    }
    const std::vector<int64_t>& global = w.global;
    const std::vector<int64_t>& lengths = w.share();
    const cost::CostModel mine = sim::replica_cost_model(cm, cfg, w.replica);
    const std::string links = setup::replica_links_line(cfg, cm, w.replica);
    if (!links.empty()) fmt::print("{}\n", links);
    auto show = [&](const std::vector<Row>& rows) {
      print_compare(cfg, cm, lengths, rows);
      if (*compare) print_parts(rows);
      if (*breakdown) print_breakdown(rows);
      if (!json_out->empty()) write_compare_json(*json_out, lengths, rows);
    };
    if (!*compare) {
      show({pipeline_row(cfg, mine, lengths, cfg.parallel.schedule)});
      return;
    }
    if (paper->baselines == "paper") {
      show(paper_rows(cfg, cm, mine, global, lengths, *paper));
      return;
    }
    std::vector<Row> rows;
    for (const plan::ScheduleRow& s : plan::schedule_table())
      rows.push_back(pipeline_row(cfg, mine, lengths, s.id));
    rows.push_back(ulysses_row(cfg, cm, global));
    show(rows);
  });
}

}  // namespace infinipipe::cli
