// The training loop of one rank: each iteration takes the next global batch of
// documents, plans it (EPP by default) under the memory budget, executes the plan, clips the
// gradient norm, steps the optimizer with the scheduled lr, and reports. Checkpoints save and
// resume the model, the optimizer and the data position, so a resumed run continues bit for bit
// (with --cost-model-update off: online, plans follow the measured times of each run).
// Under mpirun (TrainOptions::groups) the rank holds its stage's layers, its dp replica runs its
// share of the batch, and gradients, norm and loss are reduced so the maths stay those of one
// process (invariant 1 of docs/architecture.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "core/config.h"
#include "cost/calibration.h"
#include "cost/cost_model.h"
#include "data/run_datasets.h"
#include "model/engine.h"
#include "model/memory.h"
#include "obs/metrics.h"
#include "obs/trace.h"
#include "plan/plan.h"
#include "runtime/cost_loop.h"
#include "runtime/executor.h"
#include "runtime/link_watch.h"
#include "runtime/rank_optimizer.h"
#include "runtime/rank_stages.h"
#include "runtime/run_batches.h"
#include "runtime/train_checkpoint.h"
#include "runtime/train_planner.h"

namespace infinipipe {
class P2p;
class ProcessGroups;
class Watchdog;
}  // namespace infinipipe

namespace infinipipe::runtime {

struct TrainOptions {
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
  // A distributed run (mpirun, world = pp × dp): this rank's groups. Null: one process.
  const ProcessGroups* groups = nullptr;
  // Distributed: armed with each action and reduction, so a hang or a killed job names them.
  Watchdog* watchdog = nullptr;
  // --measure-links: the links the caller measured before making the groups (train_links.h),
  // which the plans use too; empty: measured at start.
  cost::HostLinkTable host_links;
  // Tests only (empty in production): every executor of the run calls it after each action's
  // compute (executor.h), e.g. to make one rank slower (tests/common/slow_rank.h).
  ActionHook action_hook;
};

// Where metrics go by default: FILE if given, else LOG_DIR/metrics.jsonl, else
// SAVE/metrics.jsonl, else nowhere ("").
std::string train_metrics_path(const std::string& metrics_file, const std::string& log_dir,
                               const std::string& save_dir);

// Where rank `rank` of a distributed run writes what rank 0 writes to `path`:
// DIR/metrics.jsonl -> DIR/metrics-rank00003.jsonl ("" and rank 0 unchanged).
std::string train_rank_path(const std::string& path, int rank);

// Checks the parts of a configuration `train` cannot run (ConfigError saying what to change):
// pp × dp other than the number of processes (world_size; 1 without mpirun), Ulysses > 1, bf16,
// no training data with iterations to run.
void train_check_config(const Config& cfg, int world_size = 1);
// Every such problem, one message each: the options train cannot honour (world_size 0: the
// number of processes is not known, as in `config check`, and not checked), and with them a
// run's own needs (a dataset to train on).
std::vector<std::string> train_config_problems(const Config& cfg, int world_size);
std::vector<std::string> train_run_problems(const Config& cfg, int world_size);

// The orchestrator of one rank's training: each step() takes the next global batch (RunBatches),
// its replica's plan (TrainPlanner), executes it through this rank's stages (RankStages), reduces
// the loss, feeds the measured times to the online cost loop (CostLoop) and updates the
// parameters (RankOptimizer); each part takes and returns the values the next one needs. The
// life of one iteration: docs/architecture.md.
class Trainer {
 public:
  // Builds the model from the seed, or from cfg.training.load (newest complete checkpoint: model,
  // optimizer, iteration, data position, the cost loop's state), and opens the dataset when there
  // is training to do.
  explicit Trainer(const TrainOptions& opts);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  int64_t iteration() const { return iteration_; }  // completed iterations
  int64_t consumed_samples() const { return batches_.consumed_samples(); }
  // --outlier-delay: documents drawn from the stream and not trained yet (queued outliers and
  // the lookahead); 0 without the delay.
  int64_t delayed_documents() const { return batches_.delayed_documents(); }
  bool resumed() const { return start_.resumed; }
  // The --load (Hugging Face folder) or --pretrained-checkpoint whose weights started this run at
  // iteration 0 with a fresh optimizer; empty when it resumed or started from the seed.
  const std::string& weights_from() const { return start_.weights_from; }

  // One iteration on the next global batch.
  obs::IterationMetrics step();
  // The run has validation / test data and evaluates (--eval-iters > 0).
  bool evaluates(data::DataSplit split) const { return batches_.evaluates(split); }
  // Forward-only loss over --eval-iters global batches of `split` (train_eval.cc): the
  // validation split continues where the last evaluation stopped (evaluation `index` starts at
  // batch index × eval-iters, so a resumed run evaluates the same documents); the test split
  // starts at its beginning. Changes no weight, gradient, optimizer state or training order.
  struct EvalResult {
    double loss = 0;     // token-weighted mean over every predicted token of the batches
    int64_t tokens = 0;  // predicted tokens
    double seconds = 0;
  };
  EvalResult evaluate(data::DataSplit split, int64_t index);
  const plan::Plan& last_eval_plan() const { return last_eval_plan_; }  // its last batch's plan
  // Checkpoint of the current state into cfg.training.save (iter_NNNNNNN, then `latest`).
  void save();

  // Every parameter once, by global name (RankStages::params()).
  std::vector<ParamRef> params() { return stages_.params(); }
  // Distributed with tied embeddings and pp > 1, on the last stage's rank: its copy of
  // model.embed_tokens.weight, which stays bit-identical to the first stage's. Empty otherwise.
  std::span<const float> tied_copy_values() { return stages_.tied_copy_values(); }
  MemoryTracker& tracker() { return stages_.tracker(); }
  const plan::Plan& last_plan() const { return last_.plan; }
  // The last plan's explanation, as the plan JSON's "explain" object: the planner's candidates
  // and the chosen plan's cuts, packs and recompute. On the rank that planned it.
  nlohmann::json last_plan_explain() const;
  const std::vector<obs::StepStats>& last_stats() const { return last_stats_; }
  // The cost model the last plan was made with: the prior (cost_loop().prior()), or with
  // --cost-model-update online its time terms refitted from the actions measured so far. The
  // terms travel with the plan, so every rank of a pipeline holds the same.
  const cost::CostModel& plan_cost_model() const { return last_.cost; }
  // The online cost loop: the prior, the next plans' cost model, the calibration the run leaves,
  // the notes on a resume and a length shift.
  const CostLoop& cost_loop() const { return cost_loop_; }

 private:
  using Clock = std::chrono::steady_clock;

  // The parts of one iteration (train_step.cc). The plan of this replica's share, the next
  // batch's started in the background: fills the planner's and the wait's seconds.
  PlannedBatch step_plan(std::span<const int64_t> lengths, obs::IterationMetrics& m);
  // Runs `plan` on this rank's stages (with the dp gradient all-reduce when `grads`), the
  // sequences of `share`, the loss scaled by `loss_scale`; every rank's stats in one process.
  std::vector<obs::StepStats> execute(const plan::Plan& plan, const Batch& share, double loss_scale,
                                      int64_t iteration, DistGradReducer* grads);
  // The global per-token loss of the executed batch, after the dp gradient all-reduce; Error if
  // the plan's chunks missed tokens or training diverged.
  double step_loss(std::vector<obs::StepStats>& stats, int64_t predicted, int64_t iteration);

  // Who this rank is and how it waits (TrainOptions).
  const ProcessGroups* groups_ = nullptr;
  Watchdog* watchdog_ = nullptr;
  ActionHook action_hook_;
  std::unique_ptr<P2p> p2p_;
  // --measure-links: the links between the hosts, measured at start and again while training.
  RunLinks links_;
  CostLoop cost_loop_;
  RankStages stages_;
  // The run's configuration, with the stages' layout (which every plan keeps when the refitted
  // cost model would split the layers otherwise).
  Config cfg_;
  std::string config_yaml_;              // saved in every checkpoint
  CheckpointTokenizer saved_tokenizer_;  // what every checkpoint records of the tokenizer
  RankOptimizer optimizer_;
  RunBatches batches_;
  TrainPlanner planner_;
  TrainStart start_;
  int64_t iteration_ = 0;
  // What the last iteration planned and measured, and the last evaluation batch's plan.
  PlannedBatch last_;
  std::vector<obs::StepStats> last_stats_;
  plan::Plan last_eval_plan_;
};

// Where `train --cost-model-update online` leaves what it learned, in the --trace and --save
// directories: a calibration file for --calibration.
inline constexpr const char* kOnlineCalibrationFile = "calibration.json";
void online_calibration_write(const Trainer& trainer, const TrainOptions& opts);

// The whole `infinipipe train` run: build or resume, iterate to train_iters with reports and
// checkpoints every save_interval, save at the end. Returns the metrics of the iterations run.
// With --load equal to --save and no checkpoint there yet, it starts fresh (Megatron's idiom).
std::vector<obs::IterationMetrics> train_run(const TrainOptions& opts);

}  // namespace infinipipe::runtime
