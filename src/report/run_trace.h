// Reading a traced run (`infinipipe train --trace DIR`, written by obs/trace.h): every rank's
// Chrome trace file, the plans each replica ran and the saved configuration, into plain values the
// report joins. Every record is read by its schema (src/runlog: the fields obs writes), so a
// missing, renamed or mistyped field is an error naming it, the file and the line or event.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/plan.h"
#include "plan/plan_explain.h"
#include "runlog/metrics_record.h"

namespace infinipipe::report {

// One trace file's metadata.
struct TraceFileInfo {
  std::string path;
  int32_t world_rank = 0;
  int32_t pp = 1, dp = 1;
  int32_t stage = 0, replica = 0;
  bool one_process = true;  // pid = plan rank; one memory tracker for every stage
  std::string schedule;
};

// A plan action as it ran. `rank` is the plan's (pipeline) rank that ran it.
struct TracedAction {
  int64_t iteration = 0;
  int32_t replica = 0, rank = 0, stage = 0, chunk = 0;
  plan::ActionKind kind = plan::ActionKind::forward;
  int32_t recompute_layers = 0;
  double predicted_s = 0;
  double start_s = 0, end_s = 0;  // seconds since the run's start
  int64_t memory_bytes = -1;      // tracker bytes after the action (-1: not recorded)
  int64_t peak_bytes = -1;        // tracker peak during the action (-1: not recorded)
};

// A non-action slice: p2p_wait, allreduce, plan, optimizer, ...
struct TracedEvent {
  int64_t iteration = 0;
  int32_t replica = 0, rank = 0;
  std::string category, name;
  double start_s = 0, end_s = 0;
};

// An iteration as one process saw it, with the metrics its train loop reported.
struct TracedIteration {
  int64_t iteration = 0;
  int32_t world_rank = 0, replica = 0, stage = 0;
  double start_s = 0, end_s = 0;
  runlog::IterationMetrics metrics;
};

struct RunTrace {
  std::string dir;
  std::vector<TraceFileInfo> files;  // by world rank
  std::vector<TracedAction> actions;
  std::vector<TracedEvent> events;
  std::vector<TracedIteration> iterations;
  std::map<std::pair<int64_t, int32_t>, plan::Plan> plans;  // (iteration, replica)
  // The explanations of the plans that carry one (`train --trace-explain`), by the same key.
  std::map<std::pair<int64_t, int32_t>, plan::PlanExplain> explains;
  std::string config_yaml;  // DIR/config.yaml ("" if absent)
  // Per-iteration metrics for the loss and tokens/s curves: DIR/metrics.jsonl when the run wrote
  // it there (every iteration), else those of the traced iterations (world rank 0).
  std::vector<runlog::IterationMetrics> metrics;

  int32_t pp() const { return files.empty() ? 1 : files.front().pp; }
  int32_t dp() const { return files.empty() ? 1 : files.front().dp; }
  bool one_process() const { return files.empty() || files.front().one_process; }
};

// Parses one trace file's JSON (its events appended to `out`). Error naming `path` on anything
// that is not an infinipipe trace.
void run_trace_parse(const nlohmann::json& j, const std::string& path, RunTrace& out);
// The records of a metrics.jsonl (one JSON object a line; a half-written last line is dropped).
// Error naming the file, the line and the field of a record that does not fit the schema.
std::vector<runlog::IterationMetrics> run_metrics_parse(const std::string& text,
                                                        const std::string& path);

// Loads DIR: trace-rank*.json (at least one), plans/*.json, config.yaml. Errors name the file and
// what to do (a missing directory, no traces, malformed JSON, a trace without its plans).
RunTrace run_trace_load(const std::string& dir);

}  // namespace infinipipe::report
