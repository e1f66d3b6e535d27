// The run driver: a training run's loop and its bookkeeping, once for every runtime. Each
// iteration takes the next global batch (RunBatches), its replica's plan (TrainPlanner: planned
// on the pipeline's first rank, the next batch's ahead on a thread, shared over the backend's
// collectives), has the runtime execute it and step its optimizer (RunBackend), feeds the measured
// times to the online cost loop (CostLoop) and fills the iteration's metrics. run() adds the
// rest of a run: the start (resume, weights), evaluations at their cadence, the metrics, timings,
// trace and TensorBoard files (rewound on resume), the online fit's calibration file,
// checkpoints at their cadence, the stop vote and its report. The C++ engine and infinipipe.torch
// are two backends of it (docs/architecture.md, "Where to add: a runtime").
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "core/config.h"
#include "cost/cost_model.h"
#include "data/run_datasets.h"
#include "obs/metrics.h"
#include "obs/trace.h"
#include "plan/plan.h"
#include "runtime/cost_loop.h"
#include "runtime/run_backend.h"
#include "runtime/run_batches.h"
#include "runtime/train_planner.h"
#include "runtime/train_stop.h"

namespace infinipipe::runtime {

// What a run reports and where, whichever runtime executes it.
struct RunOptions {
  Config config;             // validated (resolve_config)
  std::string config_yaml;   // the resolved configuration as YAML, saved in every checkpoint
  std::string metrics_path;  // JSON lines appended per iteration; "" = none
  std::string timings_path;  // per-action measured vs predicted times, a JSON line per iteration
  std::string trace_dir;     // Chrome traces, plans and config for `infinipipe report` (trace.h)
  obs::TraceIterations trace_iterations;  // which iterations --trace records
  bool trace_explain = false;             // traced plans carry their explanation (plan_explain.h)
  std::string tensorboard_dir;            // TensorBoard event files, written by world rank 0
  bool quiet = false;                     // no per-iteration lines, no progress line
  std::FILE* out = stdout;                // per-iteration report lines and messages
  std::FILE* err = stderr;                // progress line
};

// Where a run starts: a checkpoint (--load), the weights of a folder (--pretrained-checkpoint, or
// --load of a Hugging Face folder), or the seed.
struct RunStart {
  int64_t iteration = 0;  // completed iterations
  DataPosition data;
  bool resumed = false;      // from a checkpoint: model, optimizer, iteration, data position
  std::string weights_from;  // the folder whose weights started the run at iteration 0
};

class RunDriver {
 public:
  // Loads cfg.training.load (the newest complete checkpoint: the backend's weights and optimizer,
  // the iteration, data position and cost loop state; or a Hugging Face folder's weights), else
  // cfg.training.pretrained_checkpoint's weights, and opens the dataset when there is training to
  // do. `backend` outlives the driver.
  RunDriver(const RunOptions& opts, RunBackend& backend);
  RunDriver(const RunDriver&) = delete;
  RunDriver& operator=(const RunDriver&) = delete;

  // The whole run: iterate to train_iters with reports, evaluations and checkpoints every
  // save_interval, stop when every rank agrees to (`stop`: made before the driver, so a signal
  // while it loads counts too), save at the end. Returns the metrics of the iterations run.
  std::vector<obs::IterationMetrics> run(RunStop& stop);

  int64_t iteration() const { return iteration_; }  // completed iterations
  int64_t consumed_samples() const { return batches_.consumed_samples(); }
  int64_t delayed_documents() const { return batches_.delayed_documents(); }
  bool resumed() const { return start_.resumed; }
  const std::string& weights_from() const { return start_.weights_from; }

  // One iteration on the next global batch.
  obs::IterationMetrics step();
  bool evaluates(data::DataSplit split) const { return batches_.evaluates(split); }
  // Forward-only loss over --eval-iters global batches of `split` (run_driver_eval.cc): the
  // validation split continues where the last evaluation stopped (evaluation `index` starts at
  // batch index × eval-iters); the test split starts at its beginning. Changes no weight,
  // gradient, optimizer state or training order.
  struct EvalResult {
    double loss = 0;     // token-weighted mean over every predicted token of the batches
    int64_t tokens = 0;  // predicted tokens
    double seconds = 0;
  };
  EvalResult evaluate(data::DataSplit split, int64_t index);
  const plan::Plan& last_eval_plan() const { return last_eval_plan_; }
  // Checkpoint of the current state into cfg.training.save (iter_NNNNNNN, then `latest`).
  void save();

  const plan::Plan& last_plan() const { return last_.plan; }
  nlohmann::json last_plan_explain() const;
  const std::vector<obs::StepStats>& last_stats() const { return last_stats_; }
  const cost::CostModel& plan_cost_model() const { return last_.cost; }
  const CostLoop& cost_loop() const { return cost_loop_; }
  const RunOptions& options() const { return opts_; }
  const RunRank& rank() const { return rank_; }

 private:
  PlannedBatch step_plan(std::span<const int64_t> lengths, obs::IterationMetrics& m);
  double step_loss(const RunBackend::Executed& e, int64_t predicted, int64_t iteration) const;
  RunStart start_load();

  RunOptions opts_;
  RunBackend& backend_;
  RunRank rank_;
  RunCollectives collectives_;
  CostLoop cost_loop_;
  // The run's configuration, with the backend's stage layout (which every plan keeps when the
  // refitted cost model would split the layers otherwise).
  Config cfg_;
  CheckpointTokenizer saved_tokenizer_;  // what every checkpoint records of the tokenizer
  RunBatches batches_;
  TrainPlanner planner_;
  RunStart start_;
  int64_t iteration_ = 0;
  PlannedBatch last_;
  std::vector<obs::StepStats> last_stats_;
  plan::Plan last_eval_plan_;
};

// `cfg` with the stages' layout: every plan keeps it.
Config config_with_layout(Config cfg, const std::vector<plan::StageSpec>& layout);

// Where `train --cost-model-update online` leaves what it learned, in the --trace and --save
// directories: a calibration file for --calibration.
inline constexpr const char* kOnlineCalibrationFile = "calibration.json";
void online_calibration_write(const RunDriver& driver);

// Where metrics go by default: FILE if given, else LOG_DIR/metrics.jsonl, else next to the
// traces (TRACE/metrics.jsonl), else SAVE/metrics.jsonl, else nowhere ("").
std::string train_metrics_path(const std::string& metrics_file, const std::string& log_dir,
                               const std::string& trace_dir, const std::string& save_dir);
// Where rank `rank` of a distributed run writes what rank 0 writes to `path`:
// DIR/metrics.jsonl -> DIR/metrics-rank00003.jsonl ("" and rank 0 unchanged).
std::string train_rank_path(const std::string& path, int rank);

// The run's options as rank `rank` uses them: the other ranks quiet, writing their own metrics
// and timings next to rank 0's; the --save folder checked before any work; with Megatron's idiom
// `--save DIR --load DIR` (or a --pretrained-checkpoint) and no checkpoint in --load yet, --load
// dropped so the run starts fresh (said on `out`).
RunOptions run_options_prepare(const RunOptions& options, int rank);

}  // namespace infinipipe::runtime
