// The parts of a trace file (`train --trace DIR`, DIR/trace-rankNNNNN.json; obs/trace.h) that the
// report reads: the file's metadata, and its complete ("X") events with their args: an action's,
// the iteration's (its metrics record, metrics_record.h) or a host event's. The other events
// (names of processes and lanes, memory counters, flows) are for trace viewers only. The fields,
// and which of them older files may lack, are listed once, in trace_record.cc.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "plan/plan.h"

namespace infinipipe::runlog {

inline constexpr const char* kTraceFormat = "infinipipe-trace";
inline constexpr int64_t kTraceVersion = 1;

// Who wrote the file ("metadata").
struct TraceMetadata {
  std::string format = kTraceFormat;
  int64_t version = kTraceVersion;
  int32_t world_rank = 0;
  int32_t pp = 1, dp = 1;
  int32_t stage = 0;  // pipeline rank (distributed); 0 in one process
  int32_t replica = 0;
  bool one_process = true;  // pid = the plan's rank; one memory tracker for every stage
  std::string schedule;
  // The traced iterations, first..last. Optional: files written before --trace-iterations have
  // max_iterations instead (the first N were traced).
  std::optional<std::array<int64_t, 2>> iterations;
  std::optional<int64_t> max_iterations;
  std::string clock;   // for people: how "ts" is measured
  std::string memory;  // for people: which tracker the memory counter reads
};

// A complete event ("ph": "X"): a span on one lane of one process. Times in µs since the run's
// start.
struct TraceSlice {
  std::string name, category;  // category: "cat"
  double ts_us = 0, dur_us = 0;
  int32_t pid = 0, tid = 0;
  nlohmann::json args = nlohmann::json::object();
};

// The args of a "forward" or "backward" slice: one plan action as it ran.
struct TraceActionArgs {
  int64_t iteration = 0;
  int32_t chunk = 0, stage = 0, replica = 0;
  plan::ActionKind kind = plan::ActionKind::forward;
  int32_t recompute_layers = 0;
  double predicted_s = 0;
  // Optional: absent where not measured (and cpu_s in files before it was recorded).
  std::optional<double> cpu_s;          // CPU seconds of the rank's thread in the action
  std::optional<int64_t> memory_bytes;  // tracker bytes after the action
  std::optional<int64_t> peak_bytes;    // tracker peak during the action
};

// The args of any other slice (point-to-point wait, all-reduce bucket, planning, optimizer).
struct TraceHostArgs {
  int64_t iteration = 0;
};

// A trace file is one JSON object: {"displayTimeUnit": "ms", "metadata": {...}, "traceEvents":
// [...]}. Its opening, up to the first event; the writer appends events and closes it with "]}".
std::string trace_file_opening(const TraceMetadata& m);
// The metadata and the events of a parsed trace file (`events` points into `j`). Error naming
// `path` when it is not a Chrome trace, or not one of infinipipe's.
struct TraceFileParts {
  TraceMetadata metadata;
  const nlohmann::json* events = nullptr;  // an array
};
TraceFileParts trace_file_from_json(const nlohmann::json& j, const std::string& path,
                                    const std::string& fix);

nlohmann::json trace_metadata_to_json(const TraceMetadata& m);
nlohmann::json trace_slice_to_json(const TraceSlice& s);
nlohmann::json trace_action_args_to_json(const TraceActionArgs& a);
nlohmann::json trace_host_args_to_json(const TraceHostArgs& a);

// Each Error names `where` (the file and the event), the field and `fix`. The metadata's format
// is checked first, so another tool's Chrome trace is named as such; then its version.
TraceMetadata trace_metadata_from_json(const nlohmann::json& j, const std::string& where,
                                       const std::string& fix);
// std::nullopt for an event of another phase (they are not read).
std::optional<TraceSlice> trace_slice_from_json(const nlohmann::json& j, const std::string& where,
                                                const std::string& fix);
TraceActionArgs trace_action_args_from_json(const nlohmann::json& j, const std::string& where,
                                            const std::string& fix);
TraceHostArgs trace_host_args_from_json(const nlohmann::json& j, const std::string& where,
                                        const std::string& fix);

}  // namespace infinipipe::runlog
