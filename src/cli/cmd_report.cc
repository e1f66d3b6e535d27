// `infinipipe report RUN_DIR`: joins the plans a traced run executed (`train --trace RUN_DIR`) with
// its per-rank traces: prediction errors per action kind, per stage and per iteration, bubbles
// and memory peaks, as tables on stdout, one self-contained HTML page and optionally JSON.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/output_file.h"
#include "cost/cost_model.h"
#include "obs/trace.h"
#include "options/options.h"
#include "profile/profile.h"
#include "report/run_compare.h"
#include "report/run_html.h"
#include "report/run_replicas.h"
#include "report/run_terms.h"
#include "report/run_trace.h"
#include "report/trace_merge.h"
#include "setup/plan_rank_order.h"

namespace infinipipe::cli {

namespace {

struct ReportArgs {
  std::string dir;
  std::string html;  // "" = RUN_DIR/report.html
  std::string json;
  std::string merge_trace;
  bool no_html = false;
};

// The calibration the run planned with, wherever the run directory is now and wherever report
// runs from: the copy train left in it, else (a run traced before train copied it) the path
// config.yaml names, which resolves from where train ran.
std::string run_calibration(const std::string& dir, const std::string& named) {
  namespace fs = std::filesystem;
  const fs::path copy = fs::path(dir) / obs::kTraceCalibrationFile;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(copy, ec))) {
    // Read as the run directory's other files are: a regular file, never through a link.
    input_file_check(copy.string(), input_kind::kCalibration, InputLinks::refuse);
    return copy.string();
  }
  if (named.empty() || fs::exists(named, ec)) return named;
  fail(
      "the run's calibration '{}' (its config.yaml) is not there from this directory: run "
      "report where train ran, or copy the file to {}",
      named, copy.string());
}

std::string html_path(const ReportArgs& a) {
  return a.html.empty() ? (std::filesystem::path(a.dir) / "report.html").string() : a.html;
}

// Every output names a file in an existing folder and none replaces a file the report reads;
// checked before the work, so a mistyped flag costs nothing.
void outputs_check(const ReportArgs& a, const report::RunTrace& trace) {
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!a.no_html) outputs.emplace_back(html_path(a), "--html");
  if (!a.json.empty()) outputs.emplace_back(a.json, "--json");
  if (!a.merge_trace.empty()) outputs.emplace_back(a.merge_trace, "--merge-trace");
  std::vector<std::string> inputs = {(std::filesystem::path(a.dir) / "metrics.jsonl").string(),
                                     (std::filesystem::path(a.dir) / "config.yaml").string()};
  for (const report::TraceFileInfo& f : trace.files) inputs.push_back(f.path);
  for (const auto& [path, label] : outputs) {
    output_path_check(path, label);
    for (const std::string& in : inputs) output_not_input_check(path, in, label);
  }
}

void run_report(const ReportArgs& a) {
  const report::RunTrace trace = report::run_trace_load(a.dir);
  outputs_check(a, trace);
  if (trace.config_yaml.empty()) {
    fail(
        "{}/config.yaml is missing: the report needs the run's configuration for its cost model; "
        "re-run `infinipipe train ... --trace {}`",
        a.dir, a.dir);
  }
  Config cfg;
  options::apply_yaml(cfg, trace.config_yaml, a.dir + "/config.yaml");
  cfg.cluster.calibration = run_calibration(a.dir, cfg.cluster.calibration);
  cfg.validate();
  // The cost model train planned with (the engine's memory terms), so predictions are the plan's.
  std::string links_note;
  const cost::CostModel cost =
      setup::run_host_links(cfg, profile::engine_cost_model(cfg), links_note);
  if (!links_note.empty()) fmt::print("{}\n", links_note);
  const report::RunCompare c = report::run_compare(trace, cost, cfg);
  fmt::print("{}", report::run_compare_tables(c));
  fmt::print("{}", report::run_rank_terms_table(trace));
  const auto replicas = report::run_replica_balance(c);
  fmt::print("{}", report::run_replica_balance_table(replicas));
  if (!a.json.empty()) {
    nlohmann::json j = report::run_compare_to_json(c);
    j["rank_time_terms"] = report::run_rank_terms_json(trace);
    j["replica_balance"] = report::run_replica_balance_json(replicas);
    output_file_write(a.json, j.dump(1) + "\n", "--json");
    fmt::print("\nwrote {}\n", a.json);
  }
  if (!a.merge_trace.empty()) {
    report::trace_merge_save(trace, a.merge_trace);
    fmt::print("\nwrote {} (every rank's trace in one, for Perfetto)\n", a.merge_trace);
  }
  if (!a.no_html) {
    const std::string path = html_path(a);
    report::run_html_save(report::run_html(c, trace), path);
    fmt::print("{}wrote {}\n", a.json.empty() ? "\n" : "", path);
  }
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "predicted vs measured for a run traced with `train --trace RUN_DIR`: time errors per action "
      "kind, stage and iteration, bubbles, memory peaks; tables on stdout and one HTML page");
  cmd->add_option("RUN_DIR", args->dir, "the directory given to `infinipipe train --trace`")
      ->required();
  cmd->add_option("--html", args->html,
                  "where to write the HTML page (default RUN_DIR/report.html)");
  cmd->add_option("--json", args->json, "also write the numbers as JSON to this file");
  cmd->add_option("--merge-trace", args->merge_trace,
                  "also write every rank's trace merged into this one Chrome trace file "
                  "(Perfetto: one process per rank, sends linked to their receives)");
  cmd->add_flag("--no-html", args->no_html, "print the tables only");
  cmd->callback([args] { run_report(*args); });
}

}  // namespace infinipipe::cli
