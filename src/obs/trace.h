// Chrome trace-event files of a training run (`infinipipe train --trace DIR`), loadable in
// Perfetto or chrome://tracing, and what `infinipipe report DIR` joins them with:
//   DIR/trace-rank00003.json   one per process: every action ("X" events, tid = lane), point-to-
//                              point waits, all-reduce buckets, planning, the optimizer step, the
//                              iteration (args: its metrics) and a "memory" counter after each
//                              action; µs since the run's start on one clock for all ranks.
//   DIR/plans/iter-00000003-replica0.json   the plan each replica ran (plan_json format).
//   DIR/config.yaml            the resolved configuration (the report's cost model and simulator).
// Only the iterations of --trace-iterations (default: the first 50) are traced, so a long run's
// trace stays small enough to open. The JSON is closed after every iteration: a killed run leaves
// valid files. Every activation and gradient sent between stages is a flow ("s" on the sender's
// action, "f" on the receiver's) whose id is unique over the run, so a merged trace pairs them.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "obs/metrics.h"
#include "obs/step_stats.h"
#include "plan/plan.h"

namespace infinipipe::obs {

// The iterations a run traces, first..last (1-based, inclusive).
struct TraceIterations {
  int64_t first = 1;
  int64_t last = 50;
  bool contains(int64_t iteration) const { return iteration >= first && iteration <= last; }
};

// "A-B" or "N" (= N-N); ConfigError naming --trace-iterations on anything else.
TraceIterations trace_iterations_parse(const std::string& text);

// The flow id of what `stage` sends after action (kind, chunk) of `iteration` on `replica`: the
// same on the sender's "s" and the receiver's "f", different for every transfer of a run.
uint64_t trace_flow_id(int64_t iteration, int32_t replica, int32_t from_stage, int32_t chunk,
                       plan::ActionKind kind);

// Lanes (trace "tid") of a rank.
enum TraceLane : int32_t {
  trace_lane_compute = 0,    // forward / backward actions
  trace_lane_p2p = 1,        // waits for activations and gradients of neighbours
  trace_lane_host = 2,       // iteration span, planning, optimizer, scalar reductions
  trace_lane_allreduce = 3,  // gradient buckets; overlapping buckets take lanes 3, 4, ...
};

// Who writes a trace file.
struct TraceProcess {
  int32_t world_rank = 0;
  int32_t pp = 1, dp = 1;
  int32_t stage = 0;  // pipeline rank (distributed); 0 in one process
  int32_t replica = 0;
  // One process runs every pipeline rank of the plan (no mpirun): pid = the plan's rank and one
  // MemoryTracker holds all stages. Otherwise pid = world rank.
  bool one_process = true;
};

using TraceClock = std::chrono::steady_clock;

// DIR/trace-rank00003.json, DIR/plans/iter-00000003-replica0.json.
std::string trace_file_path(const std::string& dir, int32_t world_rank);
std::string trace_plan_path(const std::string& dir, int64_t iteration, int32_t replica);

// Adds a host event to `stats` (seconds relative to stats.t0, which planning may precede).
void trace_event_add(StepStats& stats, std::string category, std::string name,
                     TraceClock::time_point start, TraceClock::time_point end);

// The trace events of one iteration (sorted by pid, lane, then time; "X", "C" and the flows
// "s" / "f" of every send and receive of `num_stages` stages): `stats` holds one StepStats per
// plan rank in one process, else this rank's only.
nlohmann::json trace_iteration_events(const TraceProcess& who, const IterationMetrics& m,
                                      int32_t num_stages,
                                      const std::vector<StepStats>& stats,
                                      TraceClock::time_point origin,
                                      TraceClock::time_point step_start,
                                      TraceClock::time_point step_end);

// The calibration a traced run planned with, copied into its directory so that `report` finds
// it wherever the directory moves (config.yaml keeps the path the run was given).
inline constexpr const char* kTraceCalibrationFile = "prior-calibration.json";

class TraceWriter {
 public:
  // Creates DIR (and DIR/plans) and this process's trace file, replacing an older one.
  // `config_yaml` is written to DIR/config.yaml by world rank 0, and the run's `calibration` file
  // (--calibration; "" none) copied to DIR/prior-calibration.json. Error when DIR is unwritable.
  TraceWriter(const std::string& dir, const TraceProcess& who, const std::string& config_yaml,
              const std::string& schedule, TraceClock::time_point origin,
              TraceIterations iterations = {}, const std::string& calibration = "");
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Appends an iteration (and saves its plan from the first pipeline rank of each replica, with
  // `explain` as its "explain" object when given); outside the traced iterations it does nothing
  // and returns false.
  bool iteration_add(const IterationMetrics& m, const plan::Plan& plan,
                     const std::vector<StepStats>& stats, TraceClock::time_point step_start,
                     TraceClock::time_point step_end, const nlohmann::json* explain = nullptr);
  // Whether iteration_add saves this process's plan of `iteration`.
  bool saves_plan(int64_t iteration) const {
    return iterations_.contains(iteration) && (who_.one_process || who_.stage == 0);
  }
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& text);

  std::string dir_, path_;
  TraceProcess who_;
  TraceClock::time_point origin_;
  std::FILE* file_ = nullptr;
  long tail_ = 0;  // where the closing "]}" starts: the next events overwrite it
  TraceIterations iterations_;
};

}  // namespace infinipipe::obs
