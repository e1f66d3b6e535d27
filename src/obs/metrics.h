// What a training iteration reports: the numbers (one JSON line each in metrics.jsonl,
// runlog::metrics_record_to_json), the human line on stdout, and the progress line with ETA on
// stderr (rewritten in place on a terminal, an occasional plain line otherwise).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "obs/step_stats.h"
#include "runlog/metrics_record.h"

namespace infinipipe::obs {

// The record is runlog's (runlog/metrics_record.h: its fields, JSON form and reader).
using runlog::IterationMetrics;

// " iter 3/30 | loss 4.1234 | 12.3K tok/s | lr 3.00e-04 | grad norm 1.234 | peak 40.0 MiB
// (predicted 42.0 MiB) | epp K=2, adaptive recompute"
std::string metrics_format_line(const IterationMetrics& m);

// Every action each rank ran in one iteration, measured next to predicted: a timings record
// (runlog/timings_record.h), one line of `train --timings FILE`. ranks[i] is pipeline rank
// first_rank + i (one process holds them all; a distributed rank passes its own alone).
nlohmann::json action_timings_to_json(int64_t iteration, double predicted_step_seconds,
                                      const std::vector<StepStats>& ranks,
                                      int32_t first_rank = 0);

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
