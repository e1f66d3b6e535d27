// The training loop of one rank: each iteration takes the next global batch of
// documents, plans it (EPP by default) under the memory budget, executes the plan, clips the
// gradient norm, steps the optimizer with the scheduled lr, and reports. Checkpoints save and
// resume the model, the optimizer and the data position, so a resumed run continues bit for bit
// (with --cost-model-update off: online, plans follow the measured times of each run).
// Under mpirun (TrainOptions::groups) the rank holds its stage's layers, its dp replica runs its
// share of the batch, and gradients, norm and loss are reduced so the maths stay those of one
// process (invariant 1 of docs/architecture.md).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "comm/mpi_allreduce.h"
#include "comm/mpi_groups.h"
#include "comm/mpi_p2p.h"
#include "comm/mpi_watchdog.h"
#include "core/config.h"
#include "cost/cost_model.h"
#include "cost/length_shift.h"
#include "cost/online_fit.h"
#include "cost/online_fit_step.h"
#include "data/document_stream.h"
#include "data/outlier_delay.h"
#include "data/run_datasets.h"
#include "model/engine.h"
#include "model/lr_schedule.h"
#include "model/optimizer.h"
#include "obs/metrics.h"
#include "obs/trace.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "runtime/dist_optimizer.h"
#include "runtime/executor.h"

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

class DistGradReducer;

class Trainer {
 public:
  // Builds the model from the seed, or from cfg.training.load (newest complete checkpoint: model,
  // optimizer, iteration, data position), and opens the dataset when there is training to do.
  explicit Trainer(const TrainOptions& opts);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  int64_t iteration() const { return iteration_; }  // completed iterations
  int64_t consumed_samples() const;
  // --outlier-delay: documents drawn from the stream and not trained yet (queued outliers and
  // the lookahead); 0 without the delay.
  int64_t delayed_documents() const {
    return delay_ ? static_cast<int64_t>(delay_->queue().size() + delay_->lookahead().size()) : 0;
  }
  bool resumed() const { return resumed_; }
  // The --load (Hugging Face folder) or --pretrained-checkpoint whose weights started this run at
  // iteration 0 with a fresh optimizer; empty when it resumed or started from the seed.
  const std::string& weights_from() const { return weights_from_; }

  // One iteration on the next global batch.
  obs::IterationMetrics step();
  // The run has validation / test data and evaluates (--eval-iters > 0).
  bool evaluates(data::DataSplit split) const;
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

  // Every parameter once, by global name (a tied LM head's copy on a later stage is left out,
  // also when that stage runs on another rank than the embedding: the first stage's rank has it).
  std::vector<ParamRef> params();
  // Distributed with tied embeddings and pp > 1, on the last stage's rank: its copy of
  // model.embed_tokens.weight, which stays bit-identical to the first stage's. Empty otherwise.
  std::span<const float> tied_copy_values();
  MemoryTracker& tracker() { return tracker_; }
  const plan::Plan& last_plan() const { return last_plan_; }
  // The last plan's explanation, as the plan JSON's "explain" object: the planner's candidates
  // and the chosen plan's cuts, packs and recompute (train_plan.cc). On the rank that planned it.
  nlohmann::json last_plan_explain() const;
  const std::vector<obs::StepStats>& last_stats() const { return last_stats_; }
  const cost::CostModel& cost_model() const { return cm_; }
  // The cost model the last plan was made with: the prior (cost_model()), or with
  // --cost-model-update online its time terms refitted from the actions measured so far. The
  // terms travel with the plan, so every rank of a pipeline holds the same.
  const cost::CostModel& plan_cost_model() const { return last_plan_cm_; }
  // The cost model the next plans are made with (after the last refit; per-rank terms from the
  // calibration before the first).
  const cost::CostModel& next_plan_cost_model() const { return plan_cm_; }
  // --cost-model-update online: what the run learned so far, as a calibration file
  // (docs/cost-model.md, "Online refit"): distributed, the mean of the replicas' pooled terms
  // and every rank's own terms (Calibration::ranks); nullopt when off.
  std::optional<cost::Calibration> online_calibration() const;
  // After a resume with the online fit: whether the fit continued from the checkpoint's state or
  // starts from the calibration (one line for the log); empty otherwise.
  const std::string& fit_resume_note() const { return fit_resume_note_; }
  // With the online fit: a sentence when the last iteration's batch went beyond the lengths the
  // fit had seen (and the fit was widened for it), empty otherwise.
  const std::string& length_shift_note() const { return length_shift_note_; }

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds_since(Clock::time_point t);

  // A global batch: the documents that predict something (an empty document is left out), their
  // lengths truncated to seq-length, and their tokens once read (empty until then).
  struct Batch {
    std::vector<data::DocumentRef> documents;
    std::vector<int64_t> lengths;
    std::vector<std::vector<int32_t>> sequences;
  };
  // A plan of this rank's share, the planner's seconds for it and the time terms it planned with.
  struct Planned {
    plan::PlanResult result;
    double seconds = 0;
    std::array<double, cost::kNumOnlineTerms> terms{};
  };

  // Construction (train.cc).
  void model_build();
  void reducers_build();
  void optimizer_build(const OptimizerOptions& oo);
  void dataset_open();
  std::vector<ParamRef> params_local();  // params() plus this rank's tied copy, if any
  std::vector<OptimTensor> optim_tensors();
  Param* tied_remote_copy();  // the last stage's copy when the embedding lives on another rank

  // Saved state (train_checkpoint.cc).
  void checkpoint_load(const std::string& dir);
  void weights_load(const std::string& dir);  // weights only, from either kind of folder
  // The online fit's state in checkpoints (train_fit_state.cc); save: on every rank, before
  // the shard is written (replicas of a stage gather their states to replica 0, its writer).
  void fit_state_save(CheckpointShard& shard) const;
  void fit_state_load(CheckpointReader& reader);
  nlohmann::json fit_state_entry() const;
  std::string fit_state_file() const;  // "" where this rank writes no file
  nlohmann::json fit_state_gather(const std::string& mine) const;
  nlohmann::json fit_state_find(CheckpointReader& reader) const;
  cost::CostModel plan_terms_from_json(const nlohmann::json& j, const std::string& where) const;
  nlohmann::json step_costs_json() const;

  // Batches (train_batch.cc).
  Batch batch_lengths_read(std::span<const data::DocumentRef> documents,
                           data::DataSplit split = data::DataSplit::train) const;
  void batch_tokens_read(Batch& batch, data::DataSplit split = data::DataSplit::train) const;
  Batch batch_next(int64_t iteration);
  // The next global batch's documents from `stream`, through `delay` when --outlier-delay is on.
  std::vector<data::DocumentRef> documents_next(data::DocumentStream& stream,
                                                std::optional<data::OutlierDelay>& delay) const;
  // The outlier delay's state for a checkpoint's data position, and back (train_batch.cc).
  nlohmann::json delay_state() const;
  void delay_restore(const nlohmann::json& state);
  int64_t document_length(const data::DocumentRef& doc) const;  // training split, truncated
  Batch replica_share(const Batch& batch) const;

  // Planning (train_plan.cc).
  Planned plan_now(std::span<const int64_t> lengths, const cost::CostModel& cm) const;
  Planned plan_take(std::span<const int64_t> lengths);
  void plan_ahead_start();
  plan::PlanResult plan_replica(std::span<const int64_t> lengths, double& planner_seconds);
  // Evaluation (train_eval.cc): a forward-only plan of a replica's share, made on its first
  // pipeline rank and broadcast; the loss sum and predicted tokens of one batch over the world.
  plan::Plan eval_plan_replica(std::span<const int64_t> lengths);
  std::string plan_share(std::string text);  // the first stage's text to the pipeline
  std::pair<double, int64_t> eval_batch(const Batch& batch, int64_t predicted,
                                        data::DataSplit split);
  void plan_broadcast(void* data, int count, MPI_Datatype type, const std::string& what);
  // last_plan_cm_: the shared terms and the plan's per-rank ones.
  void plan_cost_set(const std::array<double, cost::kNumOnlineTerms>& terms,
                     const plan::Plan& plan);

  // The online refit (train_cost.cc): this rank's measured actions into its fit, the pipeline's
  // fits pooled into the coefficients the next plans use.
  void cost_model_update(int64_t iteration);
  // The step-cost sample of this iteration: the gaps before its actions, then each part of the
  // tail as it runs, then the fit.
  void step_costs_measure_actions();
  void step_costs_add_tail(Clock::time_point start);
  void step_costs_update();
  std::vector<cost::Coefficients> rank_coefficients_gather(int64_t iteration) const;
  void replica_fits_gather(int64_t iteration);
  // Distributed with a calibration that holds per-rank terms (calibration_ranks.h): the next
  // plans time each rank with them; returns this rank's own (nullopt when there are none).
  std::optional<cost::Coefficients> rank_costs_from_calibration();
  // Where each rank of this pipeline runs: its node, the node's cores and ranks (collective
  // over the world, then the pipeline).
  std::vector<cost::RankHost> rank_hosts_gather() const;

  // One iteration's parts, in order (train_step.cc).
  Clock::time_point step_plan(std::span<const int64_t> lengths, obs::IterationMetrics& m);
  void step_execute(const Batch& share, int64_t predicted, obs::IterationMetrics& m);
  void step_loss_reduce(int64_t predicted, obs::IterationMetrics& m);
  // The loss sum and predicted tokens of `stats`, summed over every rank of the world (`what`
  // ends the deadline messages: " of iteration 7").
  std::pair<double, int64_t> world_loss(const std::vector<obs::StepStats>& stats,
                                        const std::string& what) const;
  void step_plan_wait_trace(Clock::time_point t_plan, const obs::IterationMetrics& m);
  void step_optimize(obs::IterationMetrics& m);
  void step_metrics_fill(const Batch& batch, int64_t predicted, Clock::time_point t_start,
                         obs::IterationMetrics& m) const;
  void tied_grads_sum();
  void tied_values_copy();
  double grad_norm_clip();
  void optimizer_step(double lr);

  Config cfg_;
  std::string config_yaml_;
  cost::CostModel cm_;  // the prior: stage layout and data-parallel split (identical everywhere)
  cost::CostModel plan_cm_;       // what the planner plans with next (cm_ refitted when online)
  cost::CostModel last_plan_cm_;  // what the last plan was planned with
  std::optional<cost::OnlineFit> fit_;  // this rank's fit (--cost-model-update online)
  // Distributed and online: this rank's costs outside its actions, and what this iteration
  // measured of them so far (the tail is complete after the optimizer step).
  std::optional<cost::StepCostFit> step_fit_;
  cost::StepCostSample step_sample_;
  cost::OnlinePooled pooled_;  // the pipeline's pooled fit after the last iteration
  // Distributed and online: every replica's pooled fit and its pipeline ranks' own coefficients
  // after the last iteration, what calibration.json keeps (replica_fits_gather).
  struct ReplicaFit {
    cost::OnlinePooled pooled;
    std::vector<cost::Coefficients> ranks;  // by pipeline rank
  };
  std::vector<ReplicaFit> replica_fits_;
  // plan_cm_ before the last refit: what the background planner planned the next batch with.
  cost::CostModel plan_cm_before_refit_;
  // Resumed with the fit's state: the next batch's plan is made with these terms, as the
  // uninterrupted run's background planner made it.
  std::optional<cost::CostModel> first_plan_cm_;
  std::string fit_resume_note_;
  cost::LengthShiftDetector length_shift_;  // the lengths this rank's fit has seen
  std::string length_shift_note_;
  MemoryTracker tracker_;
  std::vector<plan::StageSpec> layout_;
  std::vector<std::unique_ptr<StageEngine>> engines_;
  std::vector<StageEngine*> engine_ptrs_;  // by global stage; null for other ranks' stages
  const ProcessGroups* groups_ = nullptr;
  std::unique_ptr<P2p> p2p_;
  std::unique_ptr<DistGradReducer> grads_;  // dp > 1: the overlapped gradient all-reduce
  // Tied embeddings and pp > 1, on the first and last stage's ranks: sums the embedding's
  // gradient with the LM head copy's over the embedding group (Megatron's).
  std::unique_ptr<GradBuckets> tied_grads_;
  // --use-distributed-optimizer and dp > 1: this replica's share of the optimizer state.
  std::unique_ptr<DistOptimizer> dist_optimizer_;
  Watchdog* watchdog_ = nullptr;
  ActionHook action_hook_;  // TrainOptions::action_hook (tests)
  std::string knobs_text_;  // the last plan's knobs, described
  std::unique_ptr<ParamOptimizer> optimizer_;
  LrSchedule lr_;
  std::optional<data::RunDatasets> datasets_;
  std::optional<data::DocumentStream> stream_;  // the training split's global batches
  std::optional<data::OutlierDelay> delay_;     // --outlier-delay: its queue and lookahead
  nlohmann::json start_delay_;                  // the delay's saved state, until dataset_open
  int64_t start_consumed_ = 0;                  // data position before the dataset is opened
  int64_t iteration_ = 0;
  bool resumed_ = false;
  std::string weights_from_;
  CheckpointTokenizer saved_tokenizer_;  // what every checkpoint records of the tokenizer
  plan::Plan last_plan_;
  plan::PlanExplain last_explain_;  // the planner's search for last_plan_ (planning rank)
  plan::Plan last_eval_plan_;
  std::vector<obs::StepStats> last_stats_;
  // The next batch's plan, made on a background thread (which never calls MPI) while this one
  // trains, by the rank that plans: its replica's lengths, and the plan to come.
  std::vector<int64_t> ahead_lengths_;
  std::future<Planned> ahead_;
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
