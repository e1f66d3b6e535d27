// Predicted vs measured for a traced run: the plan's (cost model's) time of every action against
// the trace, per action kind, per stage and per iteration; bubble ratios of the simulated and the
// measured step; predicted and measured memory peaks per stage. The numbers of `infinipipe
// report` (tables) and of its HTML page (report/run_html.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "cost/cost_model.h"
#include "report/run_trace.h"
#include "sim/executor.h"

namespace infinipipe::report {

// Relative error (measured - predicted) / predicted over a set of actions or steps.
struct ErrorStats {
  std::string label;
  int64_t count = 0;
  double predicted_s = 0, measured_s = 0;  // sums
  double median_abs_rel = 0, mean_abs_rel = 0;
  double mean_rel = 0;  // signed: > 0 when the model predicts too little
};

// predicted_s[i] > 0 pairs only (the others are counted out).
ErrorStats error_stats(const std::string& label, const std::vector<double>& predicted_s,
                       const std::vector<double>& measured_s);

// Idle share of each rank between its first and last action (1 - busy / span); 0 for an empty
// rank.
std::vector<double> idle_in_span(const sim::StepResult& step);

// How far one action kind's measured time strayed from its prediction, as a share of the
// predicted step: the sum of (measured - predicted) over its actions over the summed predicted
// steps (> 0: the kind ran longer). Pipelining hides part of an action's error, so the shares are
// what each kind put in, not a split of the step's error.
struct KindShare {
  std::string kind;  // forward, backward, recompute
  double share = 0;
};

struct IterationCompare {
  int64_t iteration = 0;
  int32_t replica = 0;
  double predicted_step_s = 0, measured_step_s = 0;
  std::map<std::string, double> kind_error_s;        // kind -> sum of measured - predicted
  double bubble_predicted = 0, bubble_measured = 0;  // mean over ranks of 1 - busy / step
  double idle_predicted = 0, idle_measured = 0;      // mean over ranks of idle_in_span
  double loss = 0, tokens_per_s = 0;                 // from the iteration's metrics (rank 0)
  bool has_metrics = false;
};

struct StageCompare {
  int32_t rank = 0;  // pipeline rank (its stages: rank, rank + pp, ... with virtual stages)
  ErrorStats time;   // its actions
  double bubble_predicted = 0, bubble_measured = 0;  // means over iterations
  double idle_predicted = 0, idle_measured = 0;
  int64_t peak_predicted = 0;  // max over iterations (the plan's prediction)
  int64_t peak_measured = -1;  // max of the tracker's peak; -1: one process holds every stage
};

struct RunCompare {
  std::string dir, schedule;
  int32_t pp = 1, dp = 1;
  bool one_process = true;
  // In one process the pipeline's ranks run one after another: the predicted step is then the
  // sum of the predicted action times, not the simulated pipeline.
  bool serial_steps = false;
  std::vector<ErrorStats> by_kind;  // forward, backward, recompute (backward that recomputes), all
  std::vector<StageCompare> stages;
  std::vector<IterationCompare> iterations;
  ErrorStats step;  // whole iterations
  // The iterations after the run's first kRunCompareWarmup (the online fit's start from its
  // calibration), and the traced iterations in windows of 10 (wider for long traces: at most
  // 10 windows), so the error's fall over the run shows. Labels name the iterations.
  ErrorStats step_after_warmup;
  std::vector<ErrorStats> step_windows;
  std::vector<std::vector<KindShare>> step_window_kinds;  // per window, largest |share| first
  double bubble_predicted = 0, bubble_measured = 0, idle_predicted = 0, idle_measured = 0;
  int64_t process_peak_measured = 0;  // one process: its tracker's peak over the run
  // One iteration (the last traced one of replica 0), simulated and measured, for the charts.
  int64_t shown_iteration = 0;
  sim::StepResult shown_predicted, shown_measured;
  // Every traced iteration of replica 0: (simulated, measured), for the Gantt selector.
  std::map<int64_t, std::pair<sim::StepResult, sim::StepResult>> replica0_steps;
};

// Each kind's share over `iterations` (those of a window), largest |share| first.
std::vector<KindShare> kind_shares(const std::vector<const IterationCompare*>& iterations);

// Iterations of a run that the "after warm-up" figure leaves out.
inline constexpr int64_t kRunCompareWarmup = 10;

// Joins the trace with its plans and the simulator. Error if the trace has no complete iteration.
RunCompare run_compare(const RunTrace& trace, const cost::CostModel& cost, const Config& cfg);

// The measured step of (iteration, replica) as a StepResult (source "runtime"), on a clock that
// starts at its first action; memory from the tracker bytes after each action.
sim::StepResult measured_step(const RunTrace& trace, const plan::Plan& plan, int64_t iteration,
                              int32_t replica, const cost::CostModel& cost, const Config& cfg);

// Markdown-ish tables: error per kind, per stage, per iteration, bubbles and memory.
std::string run_compare_tables(const RunCompare& c);
nlohmann::json run_compare_to_json(const RunCompare& c);

}  // namespace infinipipe::report
