#include "report/run_trace.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "plan/plan_json.h"
#include "runlog/trace_record.h"

namespace infinipipe::report {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;

constexpr const char* kRerun =
    "re-run `infinipipe train ... --trace DIR` (the run writes one trace-rankNNNNN.json per rank)";

// What to do about a metrics.jsonl whose records do not fit the schema.
constexpr const char* kMetricsFix =
    "the file was not written by this version of `infinipipe train` (or was edited): report the "
    "run with the version that wrote it, or re-run it";

// A run directory is read as the checkpoint loader reads a checkpoint: no file through a link.
std::string text_read(const fs::path& p, const InputKind& kind) {
  return input_file_read(p.string(), kind, InputLinks::refuse);
}

// A folder of the run directory (plans/) must not be a link to somewhere else either.
bool run_subdir_exists(const fs::path& p) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  if (ec || !fs::exists(st)) return false;
  if (fs::is_symlink(st)) {
    fail("{} is a symbolic link; the files of a run directory are never read through one: copy "
         "the directory with its links resolved (cp -rL) and report the copy",
         p.string());
  }
  if (!fs::is_directory(st)) fail("{} is not a directory; {}", p.string(), kRerun);
  return true;
}

}  // namespace

void run_trace_parse(const json& j, const std::string& path, RunTrace& out) {
  const runlog::TraceFileParts file = runlog::trace_file_from_json(j, path, kRerun);
  const runlog::TraceMetadata& meta = file.metadata;
  TraceFileInfo info;
  info.path = path;
  info.world_rank = meta.world_rank;
  info.pp = meta.pp;
  info.dp = meta.dp;
  info.stage = meta.stage;
  info.replica = meta.replica;
  info.one_process = meta.one_process;
  info.schedule = meta.schedule;
  if (info.stage >= info.pp || info.replica >= info.dp) {
    fail("{}: the metadata says stage {} replica {} of pp {} x dp {}, which cannot be; {}", path,
         info.stage, info.replica, info.pp, info.dp, kRerun);
  }
  const json& events = *file.events;
  for (size_t k = 0; k < events.size(); ++k) {
    const std::string at = fmt::format("{}: event {}", path, k);
    // Metadata ("M"), counters ("C") and flows repeat what the slices carry.
    const std::optional<runlog::TraceSlice> slice =
        runlog::trace_slice_from_json(events[k], at, kRerun);
    if (!slice) continue;
    const std::string& cat = slice->category;
    const double ts = slice->ts_us * 1e-6, dur = slice->dur_us * 1e-6;
    if (!(dur >= 0)) fail("{}: an event \"{}\" has a negative duration; {}", at, cat, kRerun);
    const int32_t rank = info.one_process ? slice->pid : info.stage;
    if (cat == "forward" || cat == "backward") {
      const runlog::TraceActionArgs args =
          runlog::trace_action_args_from_json(slice->args, at, kRerun);
      TracedAction a;
      a.iteration = args.iteration;
      a.replica = info.replica;
      a.rank = rank;
      a.stage = args.stage;
      a.chunk = args.chunk;
      a.kind = cat == "forward" ? plan::ActionKind::forward : plan::ActionKind::backward;
      if (a.kind != args.kind) {
        fail("{}: a \"{}\" event whose args say kind \"{}\"; {}", at, cat,
             plan::action_kind_name(args.kind), kRerun);
      }
      a.recompute_layers = args.recompute_layers;
      a.predicted_s = args.predicted_s;
      a.start_s = ts;
      a.end_s = ts + dur;
      a.peak_bytes = args.peak_bytes.value_or(-1);
      a.memory_bytes = args.memory_bytes.value_or(-1);
      out.actions.push_back(a);
    } else if (cat == "iteration") {
      TracedIteration it;
      it.metrics = runlog::metrics_record_from_json(slice->args, at, kRerun);
      it.iteration = it.metrics.iteration;
      it.world_rank = info.world_rank;
      it.replica = info.replica;
      it.stage = info.stage;
      it.start_s = ts;
      it.end_s = ts + dur;
      out.iterations.push_back(std::move(it));
    } else {
      TracedEvent ev;
      ev.iteration = runlog::trace_host_args_from_json(slice->args, at, kRerun).iteration;
      ev.replica = info.replica;
      ev.rank = rank;
      ev.category = cat;
      ev.name = slice->name;
      ev.start_s = ts;
      ev.end_s = ts + dur;
      out.events.push_back(std::move(ev));
    }
  }
  out.files.push_back(std::move(info));
}

namespace {

// DIR's trace-rank*.json, sorted; Error if it has none.
std::vector<fs::path> trace_files_list(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    fail(
        "the run directory {} does not exist; pass the DIR given to `infinipipe train --trace DIR`",
        dir);
  }
  std::vector<fs::path> traces;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("trace-rank", 0) == 0 && entry.path().extension() == ".json") {
      traces.push_back(entry.path());
    }
  }
  if (traces.empty()) {
    fail("{} holds no trace-rank*.json; {}", dir, kRerun);
  }
  std::sort(traces.begin(), traces.end());
  return traces;
}

void trace_file_read(const fs::path& p, RunTrace& out) {
  const json j = json_parse(text_read(p, input_kind::kRunTrace), p.string(),
                            std::string("was the run killed while writing it? ") + kRerun);
  run_trace_parse(j, p.string(), out);
}

// The trace files come from one run, and every rank's is there.
void trace_files_check(const RunTrace& out) {
  const TraceFileInfo& f0 = out.files.front();
  for (const TraceFileInfo& f : out.files) {
    if (f.pp != f0.pp || f.dp != f0.dp || f.one_process != f0.one_process) {
      fail(
          "{} and {} come from different runs (pp {} x dp {} vs pp {} x dp {}); give every run "
          "its own --trace directory",
          f0.path, f.path, f0.pp, f0.dp, f.pp, f.dp);
    }
  }
  if (!f0.one_process && static_cast<int32_t>(out.files.size()) != f0.pp * f0.dp) {
    fail(
        "{} has {} trace files, but the run had pp {} x dp {} = {} ranks; a rank's trace is "
        "missing (copy the whole directory, or re-run)",
        out.dir, out.files.size(), f0.pp, f0.dp, f0.pp * f0.dp);
  }
}

// One plan file, and its explanation when it carries one.
void plan_file_read(const std::string& path, std::pair<int64_t, int32_t> key, RunTrace& out) {
  const json j =
      json_parse(input_file_read(path, input_kind::kRunPlan, InputLinks::refuse), path, kRerun);
  try {
    out.plans[key] = plan::plan_from_json(j);
    if (j.is_object() && j.contains("explain"))
      out.explains[key] = plan::explain_from_json(j["explain"], "explain");
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

// DIR/plans/iter-N-replicaR.json, one per traced (iteration, replica).
void plans_read(const std::string& dir, RunTrace& out) {
  std::error_code ec;
  const fs::path plans = fs::path(dir) / "plans";
  if (run_subdir_exists(plans)) {
    for (const auto& entry : fs::directory_iterator(plans, ec)) {
      long long iteration = 0;
      int replica = 0;
      char tail = 0;
      const std::string name = entry.path().filename().string();
      if (std::sscanf(name.c_str(), "iter-%lld-replica%d.jso%c", &iteration, &replica, &tail) !=
              3 ||
          tail != 'n') {
        continue;  // temporary files and anything else
      }
      plan_file_read(entry.path().string(), {iteration, replica}, out);
    }
  }
  for (const TracedAction& a : out.actions) {
    if (out.plans.count({a.iteration, a.replica}) == 0) {
      fail(
          "{} has no plan of iteration {} replica {} (expected {}); the trace directory is "
          "incomplete: {}",
          dir, a.iteration, a.replica,
          (plans / fmt::format("iter-{:08d}-replica{}.json", a.iteration, a.replica)).string(),
          kRerun);
    }
  }
}

// DIR/metrics.jsonl when there is one, else rank 0's iterations from the traces.
void metrics_read(const std::string& dir, RunTrace& out) {
  std::error_code ec;
  const fs::path metrics = fs::path(dir) / "metrics.jsonl";
  if (!fs::exists(fs::symlink_status(metrics, ec))) {
    for (const TracedIteration& it : out.iterations) {
      if (it.world_rank == 0) out.metrics.push_back(it.metrics);
    }
    return;
  }
  out.metrics =
      run_metrics_parse(text_read(metrics, input_kind::kRunMetrics), metrics.string());
}

}  // namespace

std::vector<runlog::IterationMetrics> run_metrics_parse(const std::string& text,
                                                        const std::string& path) {
  std::vector<runlog::IterationMetrics> records;
  std::istringstream lines(text);
  std::string line;
  for (int64_t n = 1; std::getline(lines, line); ++n) {
    if (line.empty()) continue;
    const std::string where = fmt::format("{} line {}", path, n);
    json record;
    try {
      record = json_parse(line, where, "remove the line or the file");
    } catch (const Error&) {
      // A killed run can leave its last line half written; anything else is damage.
      if (lines.peek() != EOF) throw;
      continue;
    }
    records.push_back(runlog::metrics_record_from_json(record, where, kMetricsFix));
  }
  return records;
}

RunTrace run_trace_load(const std::string& dir) {
  RunTrace out;
  out.dir = dir;
  for (const fs::path& p : trace_files_list(dir)) trace_file_read(p, out);
  trace_files_check(out);
  plans_read(dir, out);
  std::error_code ec;
  const fs::path cfg = fs::path(dir) / "config.yaml";
  if (fs::exists(fs::symlink_status(cfg, ec)))
    out.config_yaml = text_read(cfg, input_kind::kRunConfig);
  metrics_read(dir, out);
  return out;
}

}  // namespace infinipipe::report
