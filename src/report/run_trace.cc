#include "report/run_trace.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "core/json_read.h"
#include "plan/plan_json.h"

namespace infinipipe::report {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;

constexpr const char* kRerun =
    "re-run `infinipipe train ... --trace DIR` (the run writes one trace-rankNNNNN.json per rank)";

template <typename T>
T field(const json& obj, const char* key, const std::string& path, const char* what) {
  if (!obj.is_object() || !obj.contains(key)) {
    fail("{}: {} has no \"{}\"; this is not a trace of `infinipipe train --trace`; {}", path, what,
         key, kRerun);
  }
  const json& v = obj.at(key);
  const std::string where = fmt::format("{}: \"{}\" of {}", path, key, what);
  if constexpr (std::is_same_v<T, bool>) {
    return json_bool(v, where);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return json_string(v, where);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(
        json_int(v, where, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  } else {
    return json_number(v, where);
  }
}

// The fields of a metrics record the report reads: numbers when present (a record may hold
// more, and older runs fewer).
void metrics_record_check(const json& r, const std::string& where) {
  if (!r.is_object())
    fail("{}: a metrics record must be a JSON object, got {}", where, json_brief(r));
  if (r.contains("iteration")) json_int(r["iteration"], where + ": iteration", 0);
  for (const char* key : {"loss", "tokens_per_s"})
    if (r.contains(key) && !r[key].is_null())
      json_number(r[key], fmt::format("{}: {}", where, key));
  if (r.contains("measured_peak_bytes"))
    json_int(r["measured_peak_bytes"], where + ": measured_peak_bytes", 0);
}

std::string text_read(const fs::path& p) {
  std::ifstream in(p);
  if (!in) fail("cannot read {}: check its permissions", p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

void run_trace_parse(const json& j, const std::string& path, RunTrace& out) {
  if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array()) {
    fail("{} has no \"traceEvents\" array; it is not a Chrome trace; {}", path, kRerun);
  }
  const json meta = j.contains("metadata") ? j["metadata"] : json();
  if (field<std::string>(meta, "format", path, "the metadata") != "infinipipe-trace") {
    fail("{} is a Chrome trace, but not one of `infinipipe train --trace`; {}", path, kRerun);
  }
  TraceFileInfo info;
  info.path = path;
  info.world_rank = field<int32_t>(meta, "world_rank", path, "the metadata");
  info.pp = field<int32_t>(meta, "pp", path, "the metadata");
  info.dp = field<int32_t>(meta, "dp", path, "the metadata");
  info.stage = field<int32_t>(meta, "stage", path, "the metadata");
  info.replica = field<int32_t>(meta, "replica", path, "the metadata");
  info.one_process = field<bool>(meta, "one_process", path, "the metadata");
  info.schedule = field<std::string>(meta, "schedule", path, "the metadata");
  if (info.pp < 1 || info.dp < 1 || info.stage < 0 || info.stage >= info.pp || info.replica < 0 ||
      info.replica >= info.dp) {
    fail("{}: the metadata says stage {} replica {} of pp {} x dp {}, which cannot be; {}", path,
         info.stage, info.replica, info.pp, info.dp, kRerun);
  }
  for (const json& e : j["traceEvents"]) {
    const std::string ph = field<std::string>(e, "ph", path, "an event");
    if (ph != "X") continue;  // metadata ("M") and counters ("C") repeat what slices carry
    const std::string cat = field<std::string>(e, "cat", path, "an event");
    const json& args = e.contains("args") ? e["args"] : json();
    const double ts = field<double>(e, "ts", path, "an event") * 1e-6;
    const double dur = field<double>(e, "dur", path, "an event") * 1e-6;
    if (!(dur >= 0)) fail("{}: an event \"{}\" has a negative duration; {}", path, cat, kRerun);
    const int32_t pid = field<int32_t>(e, "pid", path, "an event");
    const int32_t rank = info.one_process ? pid : info.stage;
    if (cat == "forward" || cat == "backward") {
      TracedAction a;
      a.iteration = field<int64_t>(args, "iteration", path, "an action's args");
      a.replica = info.replica;
      a.rank = rank;
      a.stage = field<int32_t>(args, "stage", path, "an action's args");
      a.chunk = field<int32_t>(args, "chunk", path, "an action's args");
      a.kind = cat == "forward" ? plan::ActionKind::forward : plan::ActionKind::backward;
      a.recompute_layers = field<int32_t>(args, "recompute_layers", path, "an action's args");
      a.predicted_s = field<double>(args, "predicted_s", path, "an action's args");
      a.start_s = ts;
      a.end_s = ts + dur;
      if (args.contains("peak_bytes")) {
        a.peak_bytes = field<int64_t>(args, "peak_bytes", path, "an action's args");
      }
      if (args.contains("memory_bytes")) {
        a.memory_bytes = field<int64_t>(args, "memory_bytes", path, "an action's args");
      }
      out.actions.push_back(a);
    } else if (cat == "iteration") {
      TracedIteration it;
      it.iteration = field<int64_t>(args, "iteration", path, "an iteration's args");
      it.world_rank = info.world_rank;
      it.replica = info.replica;
      it.stage = info.stage;
      it.start_s = ts;
      it.end_s = ts + dur;
      metrics_record_check(args, path + ": an iteration's args");
      it.metrics = args;
      out.iterations.push_back(std::move(it));
    } else {
      TracedEvent ev;
      ev.iteration = args.contains("iteration")
                         ? field<int64_t>(args, "iteration", path, "an event's args")
                         : 0;
      ev.replica = info.replica;
      ev.rank = rank;
      ev.category = cat;
      ev.name = field<std::string>(e, "name", path, "an event");
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
  const json j = json_parse(text_read(p), p.string(),
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
  const json j = json_read_file(path, kRerun);
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
  if (fs::is_directory(plans, ec)) {
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
  if (!fs::exists(metrics, ec)) {
    for (const TracedIteration& it : out.iterations) {
      if (it.world_rank == 0) out.metrics.push_back(it.metrics);
    }
    return;
  }
  out.metrics = run_metrics_parse(text_read(metrics), metrics.string());
}

}  // namespace

std::vector<json> run_metrics_parse(const std::string& text, const std::string& path) {
  std::vector<json> records;
  std::istringstream lines(text);
  std::string line;
  for (int64_t n = 1; std::getline(lines, line); ++n) {
    if (line.empty()) continue;
    const std::string where = fmt::format("{} line {}", path, n);
    try {
      records.push_back(json_parse(line, where, "remove the line or the file"));
    } catch (const Error&) {
      // A killed run can leave its last line half written; anything else is damage.
      if (lines.peek() != EOF) throw;
      continue;
    }
    metrics_record_check(records.back(), where);
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
  if (fs::exists(cfg, ec)) out.config_yaml = text_read(cfg);
  metrics_read(dir, out);
  return out;
}

}  // namespace infinipipe::report
