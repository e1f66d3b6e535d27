// The C++ engine as a run driver's backend (run_backend.h): this rank's stages (RankStages) and
// their optimizer (RankOptimizer), the plan's actions through the executor (one process) or over
// MPI (TrainOptions::groups), the losses and gradient sums over the ranks, the links
// `--measure-links` watches, and the collectives over MPI.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "cost/host_link_table.h"
#include "runtime/executor.h"
#include "runtime/link_watch.h"
#include "runtime/rank_optimizer.h"
#include "runtime/rank_stages.h"
#include "runtime/run_backend.h"

namespace infinipipe {
class P2p;
class ProcessGroups;
class Watchdog;
}  // namespace infinipipe

namespace infinipipe::runtime {

// What the engine needs besides the run's configuration.
struct EngineRanks {
  // A distributed run (mpirun, world = pp × dp): this rank's groups. Null: one process.
  const ProcessGroups* groups = nullptr;
  // Distributed: armed with each action and reduction, so a hang or a killed job names them.
  Watchdog* watchdog = nullptr;
  // --measure-links: the links the caller measured before making the groups (train_links.h),
  // which the plans use too; empty: measured at start.
  cost::HostLinkTable host_links;
  // Tests only: every executor of the run calls it after each action's compute (executor.h).
  ActionHook action_hook;
};

class EngineBackend final : public RunBackend {
 public:
  // `cfg`: the run's, checked (train_check_config: ConfigError before any collective).
  EngineBackend(const Config& cfg, const EngineRanks& ranks);
  ~EngineBackend() override;
  EngineBackend(const EngineBackend&) = delete;
  EngineBackend& operator=(const EngineBackend&) = delete;

  RunRank rank() const override;
  RunCollectives collectives() override;
  const cost::CostModel& prior() const override { return prior_; }
  const std::vector<plan::StageSpec>& layout() const override { return stages_.layout(); }
  Executed train(const plan::Plan& plan, std::span<const std::vector<int32_t>> share,
                 double loss_scale, int64_t iteration) override;
  std::pair<double, int64_t> evaluate(const plan::Plan& plan,
                                      std::span<const std::vector<int32_t>> share,
                                      const std::string& what) override;
  Update optimizer_step(int64_t completed) override;
  void memory_measured(obs::IterationMetrics& m) override;
  bool iteration_end(const obs::IterationMetrics& m, const plan::Plan& plan,
                     CostLoop& cost_loop) override;
  ShardPlan shard_fill(CheckpointShard& shard, std::deque<std::vector<float>>& storage,
                               int64_t iteration) override;
  void load(CheckpointReader& reader) override;
  void weights_load(const std::string& dir) override;

  RankStages& stages() { return stages_; }

 private:
  std::vector<obs::StepStats> execute(const plan::Plan& plan,
                                      std::span<const std::vector<int32_t>> share,
                                      double loss_scale, int64_t iteration,
                                      DistGradReducer* grads);

  const ProcessGroups* groups_ = nullptr;
  Watchdog* watchdog_ = nullptr;
  ActionHook action_hook_;
  std::unique_ptr<P2p> p2p_;
  // --measure-links: the links between the hosts, measured at start and again while training.
  RunLinks links_;
  ModelConfig model_;
  cost::CostModel prior_;
  RankStages stages_;
  RankOptimizer optimizer_;
};

}  // namespace infinipipe::runtime
