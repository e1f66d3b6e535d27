// What a runtime supplies to the run driver (run_driver.h): this rank's execution of its plans,
// its gradients and optimizer, its shards of a checkpoint, and the collectives the driver runs
// over the ranks. Everything else of a run (its batches, plans, cost loop, evaluations, files,
// checkpoints' cadence and stops) is the driver's, written once for every runtime. The C++
// engine (engine_backend.h) and infinipipe.torch (python/bindings/bind_run.cc) implement it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "cost/cost_model.h"
#include "obs/metrics.h"
#include "obs/step_stats.h"
#include "plan/plan.h"
#include "runtime/cost_loop.h"

namespace infinipipe::runtime {

// The collectives of a distributed run, over the runtime's own process groups (unset in one
// process). `what` names the wait in deadline messages.
struct RunCollectives {
  CostLoopCollectives cost;  // the online fit's sums and gather
  // The first rank of this rank's pipeline's `text` on every rank of the pipeline (the plan).
  std::function<std::string(std::string text, const std::string& what)> pipeline_share;
  // The element-wise maximum of `values` over every rank, in place: the stop vote after
  // `iteration` (train_stop.h).
  std::function<void(std::span<int32_t> values, int64_t iteration)> stop_agree;
  std::function<void(const std::string& what)> barrier;
};

// This rank's place in the run: the world rank, its stage (pipeline rank) and replica.
struct RunRank {
  bool distributed = false;
  int32_t world_rank = 0, world_size = 1;
  int32_t stage = 0, replica = 0;
  int64_t pp = 1, dp = 1;
  bool plans = true;  // this rank plans its pipeline's batches (the pipeline's first rank)
};

class RunBackend {
 public:
  virtual ~RunBackend() = default;

  virtual RunRank rank() const = 0;
  virtual RunCollectives collectives() = 0;
  // The cost model before any measurement, with where this rank's pipeline runs.
  virtual const cost::CostModel& prior() const = 0;
  // The stages' layout this runtime built (every plan keeps it).
  virtual const std::vector<plan::StageSpec>& layout() const = 0;

  // One training iteration's actions of this rank: `plan` over `share` (this replica's
  // sequences), the loss gradient scaled by `loss_scale`; gradients from zero, summed over the
  // replicas; the loss summed over the world. `what` ends wait messages (" of iteration 7").
  struct Executed {
    std::vector<obs::StepStats> stats;  // one per process of the plan's ranks this process runs
    double loss_sum = 0;                // over the world
    int64_t loss_tokens = 0;            // over the world
    // Seconds of this rank's own work after its last action (the exposed gradient sums).
    double tail_seconds = 0;
    double seconds = 0;  // the actions' wall time
  };
  virtual Executed train(const plan::Plan& plan, std::span<const std::vector<int32_t>> share,
                         double loss_scale, int64_t iteration) = 0;
  // A forward-only plan: loss sum and predicted tokens over the world.
  virtual std::pair<double, int64_t> evaluate(const plan::Plan& plan,
                                              std::span<const std::vector<int32_t>> share,
                                              const std::string& what) = 0;
  // The update after `completed` iterations (clipped, stepped with the schedule's lr).
  struct Update {
    double grad_norm = 0;  // before clipping
    double lr = 0;
  };
  virtual Update optimizer_step(int64_t completed) = 0;
  // What this rank's memory did in the last iteration (the measured peaks of `m`).
  virtual void memory_measured(obs::IterationMetrics& m) = 0;
  // After iteration `m`: true when the next plans must not be the ones made ahead (the runtime
  // measured its links again and they changed; cost_loop already follows them).
  virtual bool iteration_end(const obs::IterationMetrics& m, const plan::Plan& plan,
                             CostLoop& cost_loop) = 0;

  // Checkpoints: this rank's weights and optimizer state after `iteration` into `shard`,
  // numbered for its writer (arrays kept in `storage` until written). Returns whether this rank writes a
  // shard; `every_replica_saves` says whether every replica writes one (a sharded optimizer).
  struct ShardPlan {
    bool writes = true;
    bool every_replica_saves = false;
  };
  virtual ShardPlan shard_fill(CheckpointShard& shard, std::deque<std::vector<float>>& storage,
                               int64_t iteration) = 0;
  // Weights and optimizer state from a checkpoint (every stage this rank holds).
  virtual void load(CheckpointReader& reader) = 0;
  // Weights only, from a Hugging Face folder or a checkpoint (the optimizer stays fresh).
  virtual void weights_load(const std::string& dir) = 0;
};

}  // namespace infinipipe::runtime
