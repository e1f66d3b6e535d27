// The training loop of one rank on the C++ engine: each iteration takes the next global batch of
// documents, plans it (EPP by default) under the memory budget, executes the plan, clips the
// gradient norm, steps the optimizer with the scheduled lr, and reports. Checkpoints save and
// resume the model, the optimizer and the data position, so a resumed run continues bit for bit
// (with --cost-model-update off: online, plans follow the measured times of each run).
// Under mpirun (TrainOptions::groups) the rank holds its stage's layers, its dp replica runs its
// share of the batch, and gradients, norm and loss are reduced so the maths stay those of one
// process (invariant 1 of docs/architecture.md). The loop is the run driver's (run_driver.h);
// the engine is its backend (engine_backend.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "model/memory.h"
#include "model/params.h"
#include "obs/metrics.h"
#include "plan/plan.h"
#include "runtime/engine_backend.h"
#include "runtime/run_driver.h"
#include "runtime/train_capabilities.h"

namespace infinipipe::runtime {

// A run's options (run_driver.h) and what the engine needs besides them (engine_backend.h).
struct TrainOptions : RunOptions, EngineRanks {};

// One rank's training on the C++ engine: the run driver over an EngineBackend. What the driver
// offers (step, evaluate, save, the last plan and the cost loop) is the driver's; params(),
// tied_copy_values() and tracker() are the engine's.
class Trainer {
 public:
  explicit Trainer(const TrainOptions& opts);

  RunDriver& driver() { return driver_; }
  int64_t iteration() const { return driver_.iteration(); }
  int64_t consumed_samples() const { return driver_.consumed_samples(); }
  int64_t delayed_documents() const { return driver_.delayed_documents(); }
  bool resumed() const { return driver_.resumed(); }
  const std::string& weights_from() const { return driver_.weights_from(); }
  obs::IterationMetrics step() { return driver_.step(); }
  bool evaluates(data::DataSplit split) const { return driver_.evaluates(split); }
  using EvalResult = RunDriver::EvalResult;
  EvalResult evaluate(data::DataSplit split, int64_t index) { return driver_.evaluate(split, index); }
  const plan::Plan& last_eval_plan() const { return driver_.last_eval_plan(); }
  void save() { driver_.save(); }
  const plan::Plan& last_plan() const { return driver_.last_plan(); }
  nlohmann::json last_plan_explain() const { return driver_.last_plan_explain(); }
  const std::vector<obs::StepStats>& last_stats() const { return driver_.last_stats(); }
  const cost::CostModel& plan_cost_model() const { return driver_.plan_cost_model(); }
  const CostLoop& cost_loop() const { return driver_.cost_loop(); }

  // Every parameter once, by global name (RankStages::params()).
  std::vector<ParamRef> params() { return backend_.stages().params(); }
  // Distributed with tied embeddings and pp > 1, on the last stage's rank: its copy of
  // model.embed_tokens.weight, which stays bit-identical to the first stage's. Empty otherwise.
  std::span<const float> tied_copy_values() { return backend_.stages().tied_copy_values(); }
  MemoryTracker& tracker() { return backend_.stages().tracker(); }

 private:
  EngineBackend backend_;
  RunDriver driver_;
};

// The whole `infinipipe train` run on the C++ engine (RunDriver::run). With --load equal to
// --save and no checkpoint there yet, it starts fresh (Megatron's idiom).
std::vector<obs::IterationMetrics> train_run(const TrainOptions& opts);

}  // namespace infinipipe::runtime
