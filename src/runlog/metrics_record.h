// What a training iteration reports, one JSON line each in metrics.jsonl (and the args of the
// iteration's event in a trace): written by obs (obs/metrics.h), read by the report. The fields
// and which of them may be absent are listed once, in metrics_record.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace infinipipe::runlog {

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
  // Optional fields: absent from files of versions before them, or when there is no value.
  // This process's peak resident memory during the iteration (obs/process_rss.h; -1 = unknown,
  // and not written).
  int64_t rss_peak_bytes = -1;
  // Evaluation at the end of this iteration (--eval-interval), forward-only over --eval-iters
  // global batches: token-weighted mean loss and predicted tokens. Unset: no evaluation ran.
  std::optional<double> valid_loss;
  int64_t valid_tokens = 0;         // written with valid_loss
  std::optional<double> test_loss;  // the final test-split evaluation, on the last iteration
  int64_t test_tokens = 0;          // written with test_loss
  double eval_seconds = 0;          // wall time of this iteration's evaluations (not in `seconds`);
                                    // written with either loss
};

nlohmann::json metrics_record_to_json(const IterationMetrics& m);
// Error naming `where` (the file and the line), the field and `fix` on a missing, renamed or
// mistyped field.
IterationMetrics metrics_record_from_json(const nlohmann::json& j, const std::string& where,
                                          const std::string& fix);

}  // namespace infinipipe::runlog
