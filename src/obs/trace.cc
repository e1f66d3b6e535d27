#include "obs/trace.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/plan_json.h"
#include "runlog/trace_record.h"

namespace infinipipe::obs {

namespace fs = std::filesystem;

namespace {

double us_between(TraceClock::time_point a, TraceClock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// Microseconds with nanosecond resolution: short numbers, no float noise in the file.
double us_round(double us) {
  return std::round(us * 1000.0) / 1000.0;
}

nlohmann::json event_complete(std::string name, std::string cat, double ts, double dur, int32_t pid,
                              int32_t tid, nlohmann::json args) {
  runlog::TraceSlice s;
  s.name = std::move(name);
  s.category = std::move(cat);
  s.ts_us = us_round(ts);
  s.dur_us = us_round(std::max(0.0, dur));
  s.pid = pid;
  s.tid = tid;
  s.args = std::move(args);
  return runlog::trace_slice_to_json(s);
}

nlohmann::json event_meta(const char* what, int32_t pid, int32_t tid, const std::string& name) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

std::string lane_name(int32_t tid) {
  switch (tid) {
    case trace_lane_compute:
      return "compute";
    case trace_lane_p2p:
      return "p2p waits";
    case trace_lane_host:
      return "host";
    default:
      return tid == trace_lane_allreduce ? "allreduce"
                                         : fmt::format("allreduce {}", tid - trace_lane_allreduce);
  }
}

// The lanes the file's header names; an iteration names any further all-reduce lane it uses.
constexpr int32_t kTraceLanesNamed = trace_lane_allreduce + 3;

int32_t lane_of_category(const std::string& category) {
  if (category == "p2p_wait") return trace_lane_p2p;
  if (category == "allreduce") return trace_lane_allreduce;
  return trace_lane_host;
}

// A sample of the "memory" counter of a process.
nlohmann::json event_memory(double ts, int64_t bytes, int32_t pid) {
  return {{"name", "memory"},          {"ph", "C"},
          {"ts", us_round(ts)},        {"pid", pid},
          {"tid", trace_lane_compute}, {"args", {{"bytes", bytes}}}};
}

// A flow event binding to the enclosing slice of (pid, compute lane) at `ts`: "s" leaves the
// sender's action, "f" (bind point "e") enters the receiver's.
nlohmann::json event_flow(const char* phase, uint64_t id, double ts, int32_t pid) {
  nlohmann::json e = {{"name", "p2p"},
                      {"cat", "p2p"},
                      {"ph", phase},
                      {"id", id},
                      {"ts", us_round(ts)},
                      {"pid", pid},
                      {"tid", trace_lane_compute}};
  if (phase[0] == 'f') e["bp"] = "e";
  return e;
}

// The flows of one action of `num_stages` stages: a forward receives from the stage before and
// sends to the one after; a backward the other way round.
void action_flows_add(std::vector<nlohmann::json>& out, const plan::Action& a, int64_t iteration,
                      int32_t replica, int32_t num_stages, double ts, double dur, int32_t pid) {
  const bool forward = a.kind == plan::ActionKind::forward;
  const int32_t from = forward ? a.stage - 1 : a.stage + 1;
  const int32_t to = forward ? a.stage + 1 : a.stage - 1;
  if (from >= 0 && from < num_stages) {
    out.push_back(
        event_flow("f", trace_flow_id(iteration, replica, from, a.chunk, a.kind), ts, pid));
  }
  if (to >= 0 && to < num_stages) {
    // Inside the slice, at its end: the data leaves when the action is done.
    const double at = ts + std::max(0.0, dur - std::min(0.001, dur / 2));
    out.push_back(
        event_flow("s", trace_flow_id(iteration, replica, a.stage, a.chunk, a.kind), at, pid));
  }
}

}  // namespace

TraceIterations trace_iterations_parse(const std::string& text) {
  const auto number = [&](const std::string& part) {
    if (part.empty() || part.size() > 9 ||
        part.find_first_not_of("0123456789") != std::string::npos) {
      fail_config(
          "--trace-iterations '{}': expected FIRST-LAST or N, iterations from 1 (e.g. "
          "--trace-iterations 10-20)",
          text);
    }
    return std::stoll(part);
  };
  const size_t dash = text.find('-');
  TraceIterations r;
  r.first = number(text.substr(0, dash));
  r.last = dash == std::string::npos ? r.first : number(text.substr(dash + 1));
  if (r.first < 1 || r.last < r.first) {
    fail_config(
        "--trace-iterations '{}': the first iteration must be at least 1 and at most the "
        "last (e.g. --trace-iterations 10-20)",
        text);
  }
  if (r.last >= (int64_t{1} << 20)) {
    fail_config("--trace-iterations '{}': the trace can number iterations below {}", text,
                int64_t{1} << 20);
  }
  return r;
}

// 20 bits of iteration, 6 of replica, 8 of stage, 18 of chunk and one of kind: 53 bits, so the
// id is exact in every JSON reader (JavaScript's included).
uint64_t trace_flow_id(int64_t iteration, int32_t replica, int32_t from_stage, int32_t chunk,
                       plan::ActionKind kind) {
  if (iteration < 0 || iteration >= (1 << 20) || replica < 0 || replica >= (1 << 6) ||
      from_stage < 0 || from_stage >= (1 << 8) || chunk < 0 || chunk >= (1 << 18)) {
    fail(
        "the trace cannot number the transfer of iteration {}, replica {}, stage {}, chunk {}: "
        "trace fewer iterations, replicas, stages or chunks",
        iteration, replica, from_stage, chunk);
  }
  uint64_t id = static_cast<uint64_t>(iteration);
  id = (id << 6) | static_cast<uint64_t>(replica);
  id = (id << 8) | static_cast<uint64_t>(from_stage);
  id = (id << 18) | static_cast<uint64_t>(chunk);
  return (id << 1) | (kind == plan::ActionKind::backward ? 1u : 0u);
}

std::string trace_file_path(const std::string& dir, int32_t world_rank) {
  return (fs::path(dir) / fmt::format("trace-rank{:05d}.json", world_rank)).string();
}

std::string trace_plan_path(const std::string& dir, int64_t iteration, int32_t replica) {
  return (fs::path(dir) / "plans" / fmt::format("iter-{:08d}-replica{}.json", iteration, replica))
      .string();
}

void trace_event_add(StepStats& stats, std::string category, std::string name,
                     TraceClock::time_point start, TraceClock::time_point end) {
  stats.events.push_back({std::move(category), std::move(name),
                          std::chrono::duration<double>(start - stats.t0).count(),
                          std::chrono::duration<double>(end - stats.t0).count()});
}

nlohmann::json trace_iteration_events(const TraceProcess& who, const IterationMetrics& m,
                                      int32_t num_stages, const std::vector<StepStats>& stats,
                                      TraceClock::time_point origin,
                                      TraceClock::time_point step_start,
                                      TraceClock::time_point step_end) {
  std::vector<nlohmann::json> out;
  std::vector<nlohmann::json> lane_names;  // of all-reduce lanes beyond those the header names
  const int32_t host_pid = who.one_process ? 0 : who.world_rank;
  out.push_back(event_complete(fmt::format("iteration {}", m.iteration), "iteration",
                               us_between(origin, step_start), us_between(step_start, step_end),
                               host_pid, trace_lane_host, runlog::metrics_record_to_json(m)));
  for (size_t r = 0; r < stats.size(); ++r) {
    const StepStats& s = stats[r];
    const int32_t pid = who.one_process ? static_cast<int32_t>(r) : who.world_rank;
    const double t0 = us_between(origin, s.t0);
    for (const ActionTiming& t : s.timings) {
      const plan::Action& a = t.action;
      const char* kind = plan::action_kind_name(a.kind);
      runlog::TraceActionArgs args;
      args.iteration = m.iteration;
      args.chunk = a.chunk;
      args.stage = a.stage;
      args.replica = who.replica;
      args.kind = a.kind;
      args.recompute_layers = a.recompute_layers;
      args.predicted_s = a.predicted_time;
      if (t.cpu_s >= 0) args.cpu_s = t.cpu_s;
      if (t.memory_bytes >= 0) args.memory_bytes = t.memory_bytes;
      if (t.peak_bytes >= 0) args.peak_bytes = t.peak_bytes;
      const double ts = t0 + t.start_s * 1e6;
      const double dur = (t.end_s - t.start_s) * 1e6;
      out.push_back(event_complete(fmt::format("{} {}", kind, a.chunk), kind, ts, dur, pid,
                                   trace_lane_compute, runlog::trace_action_args_to_json(args)));
      action_flows_add(out, a, m.iteration, who.replica, num_stages, ts, dur, pid);
      // The action's peak drawn over its span, then what it left.
      if (t.peak_bytes >= 0) out.push_back(event_memory(ts, t.peak_bytes, pid));
      if (t.memory_bytes >= 0) {
        out.push_back(event_memory(t0 + t.end_s * 1e6, t.memory_bytes, pid));
      }
    }
    // Events of one lane may overlap only for all-reduce buckets in flight together: those
    // spread over lanes allreduce, allreduce 1, ... so every lane's slices nest or follow.
    std::vector<const EventTiming*> events;
    for (const EventTiming& e : s.events) events.push_back(&e);
    std::stable_sort(events.begin(), events.end(), [](const EventTiming* a, const EventTiming* b) {
      return a->start_s < b->start_s;
    });
    std::vector<double> allreduce_free;  // per extra lane: when its last bucket ended
    for (const EventTiming* e : events) {
      int32_t tid = lane_of_category(e->category);
      if (tid == trace_lane_allreduce) {
        size_t k = 0;
        while (k < allreduce_free.size() && allreduce_free[k] > e->start_s) ++k;
        if (k == allreduce_free.size()) {
          allreduce_free.push_back(0);
          const int32_t lane = trace_lane_allreduce + static_cast<int32_t>(k);
          if (lane > kTraceLanesNamed)
            lane_names.push_back(event_meta("thread_name", pid, lane, lane_name(lane)));
        }
        allreduce_free[k] = e->end_s;
        tid += static_cast<int32_t>(k);
      }
      out.push_back(event_complete(e->name, e->category, t0 + e->start_s * 1e6,
                                   (e->end_s - e->start_s) * 1e6, pid, tid,
                                   runlog::trace_host_args_to_json({m.iteration})));
    }
  }
  // Perfetto wants each lane in time order, an enclosing slice before what it encloses.
  std::stable_sort(out.begin(), out.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    const auto key = [](const nlohmann::json& e) {
      return std::make_tuple(e["pid"].get<int32_t>(), e["tid"].get<int32_t>(),
                             e["ts"].get<double>(),
                             -(e.contains("dur") ? e["dur"].get<double>() : 0.0));
    };
    return key(a) < key(b);
  });
  for (nlohmann::json& e : lane_names) out.push_back(std::move(e));
  return nlohmann::json(std::move(out));
}

TraceWriter::TraceWriter(const std::string& dir, const TraceProcess& who,
                         const std::string& config_yaml, const std::string& schedule,
                         TraceClock::time_point origin, TraceIterations iterations,
                         const std::string& calibration)
    : dir_(dir),
      path_(trace_file_path(dir, who.world_rank)),
      who_(who),
      origin_(origin),
      iterations_(iterations) {
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "plans", ec);
  if (ec) {
    fail_config("cannot create the trace directory {} ({}); choose another --trace DIR", dir,
                ec.message());
  }
  if (who.world_rank == 0) {
    const std::string cfg = (fs::path(dir) / "config.yaml").string();
    const std::string tmp = cfg + ".tmp";
    std::ofstream(tmp) << config_yaml;
    fs::rename(tmp, cfg, ec);
    if (ec) fail("cannot write {} ({}); check the --trace directory", cfg, ec.message());
    if (!calibration.empty()) {
      const fs::path copy = fs::path(dir) / kTraceCalibrationFile;
      fs::copy_file(calibration, copy.string() + ".tmp", fs::copy_options::overwrite_existing, ec);
      if (!ec) fs::rename(copy.string() + ".tmp", copy, ec);
      if (ec) {
        fail(
            "cannot copy the calibration {} into the trace directory ({}); check the --trace "
            "directory",
            calibration, ec.message());
      }
    }
  }
  file_ = std::fopen(path_.c_str(), "w");
  if (file_ == nullptr) {
    fail_config("cannot create the trace file {} ({}); choose another --trace DIR", path_,
                std::strerror(errno));
  }
  runlog::TraceMetadata meta;
  meta.world_rank = who.world_rank;
  meta.pp = who.pp;
  meta.dp = who.dp;
  meta.stage = who.stage;
  meta.replica = who.replica;
  meta.one_process = who.one_process;
  meta.schedule = schedule;
  meta.iterations = {iterations.first, iterations.last};
  meta.clock = "steady, microseconds since the run's start (ranks aligned by a barrier)";
  meta.memory =
      who.one_process ? "one tracker for every stage of the process" : "this rank's tracker";
  std::string text = runlog::trace_file_opening(meta);
  // Names of processes and lanes.
  const int32_t pids = who.one_process ? who.pp : 1;
  bool first = true;
  for (int32_t p = 0; p < pids; ++p) {
    const int32_t pid = who.one_process ? p : who.world_rank;
    const int32_t stage = who.one_process ? p : who.stage;
    std::vector<nlohmann::json> ev = {
        event_meta("process_name", pid, 0,
                   fmt::format("rank {} (stage {}, replica {})", pid, stage, who.replica)),
        {{"name", "process_sort_index"},
         {"ph", "M"},
         {"pid", pid},
         {"args", {{"sort_index", pid}}}}};
    for (int32_t tid = 0; tid <= kTraceLanesNamed; ++tid) {
      ev.push_back(event_meta("thread_name", pid, tid, lane_name(tid)));
    }
    for (const nlohmann::json& e : ev) {
      text += (first ? "\n" : ",\n") + e.dump();
      first = false;
    }
  }
  std::fputs(text.c_str(), file_);
  tail_ = std::ftell(file_);
  append("");
}

TraceWriter::~TraceWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

// Overwrites the closing "]}" with `text` and closes the JSON again, so the file parses after
// every iteration.
void TraceWriter::append(const std::string& text) {
  if (std::fseek(file_, tail_, SEEK_SET) != 0 ||
      std::fwrite(text.data(), 1, text.size(), file_) != text.size()) {
    fail("cannot write the trace file {} ({})", path_, std::strerror(errno));
  }
  tail_ = std::ftell(file_);
  const char close[] = "\n]}\n";
  if (std::fputs(close, file_) < 0 || std::fflush(file_) != 0) {
    fail("cannot write the trace file {} ({})", path_, std::strerror(errno));
  }
}

bool TraceWriter::iteration_add(const IterationMetrics& m, const plan::Plan& plan,
                                const std::vector<StepStats>& stats,
                                TraceClock::time_point step_start, TraceClock::time_point step_end,
                                const nlohmann::json* explain) {
  if (!iterations_.contains(m.iteration)) return false;
  if (saves_plan(m.iteration)) {
    plan::plan_save(plan, trace_plan_path(dir_, m.iteration, who_.replica), explain);
  }
  const nlohmann::json events =
      trace_iteration_events(who_, m, plan.num_stages(), stats, origin_, step_start, step_end);
  std::string text;
  for (const nlohmann::json& e : events) text += ",\n" + e.dump();
  append(text);
  return true;
}

}  // namespace infinipipe::obs
