// What a training iteration reports: the numbers (one JSON line each in metrics.jsonl), the
// human line on stdout, and the progress line with ETA on stderr (rewritten in place on a
// terminal, an occasional plain line otherwise).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "obs/step_stats.h"

namespace infinipipe::obs {

struct IterationMetrics {
  int64_t iteration = 0;         // 1-based: the iteration just completed
  int64_t train_iters = 0;       // the run's target
  int64_t consumed_samples = 0;  // documents handed out so far (after this iteration)
  double loss = 0;               // global per-token mean over the predicted tokens
  int64_t sequences = 0;
  int64_t tokens = 0;            // tokens processed (Σ n)
  int64_t predicted_tokens = 0;  // Σ (n − 1)
  double seconds = 0;            // wall time of the whole iteration (plan, execute, optimise)
  double plan_seconds = 0;       // the planner's time for this batch (mostly in the background)
  double plan_wait_seconds = 0;  // what the iteration waited for its plan (the exposed part)
  double tokens_per_s = 0;
  double lr = 0;
  double grad_norm = 0;  // before clipping
  std::string schedule;
  std::string plan_knobs;  // "K=4, adaptive recompute" etc.
  int32_t chunks = 0;
  int32_t recompute_layers = 0;       // Σ over forward actions: layers the plan recomputes
  double predicted_step_seconds = 0;  // the plan's predicted execution time
  double measured_step_seconds = 0;   // the executor's measured execution time
  int64_t predicted_peak_bytes = 0;   // the plan's prediction for the rank
  int64_t measured_peak_bytes = 0;    // MemoryTracker peak over the iteration, all categories
  int64_t measured_activation_peak_bytes = 0;
  int64_t memory_budget = 0;
  // This process's peak resident memory during the iteration (obs/process_rss.h; -1 = unknown).
  int64_t rss_peak_bytes = -1;
  // Evaluation at the end of this iteration (--eval-interval), forward-only over --eval-iters
  // global batches: token-weighted mean loss and predicted tokens. Unset: no evaluation ran.
  std::optional<double> valid_loss;
  int64_t valid_tokens = 0;
  std::optional<double> test_loss;  // the final test-split evaluation, on the last iteration
  int64_t test_tokens = 0;
  double eval_seconds = 0;  // wall time of this iteration's evaluations (not in `seconds`)
};

nlohmann::json metrics_to_json(const IterationMetrics& m);
// " iter 3/30 | loss 4.1234 | 12.3K tok/s | lr 3.00e-04 | grad norm 1.234 | peak 40.0 MiB
// (predicted 42.0 MiB) | epp K=2, adaptive recompute"
std::string metrics_format_line(const IterationMetrics& m);

// Every action each rank ran in one iteration, measured next to predicted:
// {"iteration": 3, "predicted_step_seconds": ..., "actions": [{"rank", "stage", "kind", "chunk",
// "recompute_layers", "predicted_s", "start_s", "end_s"}, ...]}.
nlohmann::json action_timings_to_json(int64_t iteration, double predicted_step_seconds,
                                      const std::vector<StepStats>& ranks);

// Appends one JSON object per line, flushed after each, so a crash loses at most one line.
class MetricsWriter {
 public:
  explicit MetricsWriter(const std::string& path);  // "" = writes nothing; Error if unopenable
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

// The progress line: "[ 12/300   4%] loss 3.21 | 10.1K tok/s | ETA 4m12s".
class ProgressLine {
 public:
  ProgressLine(std::FILE* out, int64_t first_iteration, int64_t train_iters, bool enabled);
  ~ProgressLine();  // ends a rewritten line
  void update(const IterationMetrics& m);
  void finish();  // newline after a rewritten line
  // Erases a rewritten line, so other output (the per-iteration report) can be printed first.
  void clear();
  // Seconds formatted as "4m12s", "1h03m", "12s".
  static std::string format_duration(double seconds);

 private:
  using Clock = std::chrono::steady_clock;
  std::FILE* out_;
  bool enabled_, tty_;
  int64_t first_, total_;
  Clock::time_point start_, last_print_;
  int64_t last_printed_iter_ = 0;
  bool open_line_ = false;
  std::optional<double> valid_loss_;  // the last evaluation's, shown until the next
};

}  // namespace infinipipe::obs
