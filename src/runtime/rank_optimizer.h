// The update of a training rank's parameters once its backwards ran: the data-parallel gradient
// sum (overlapped with backward, dist_step.h), the tied embedding's gradient joined between the
// first and the last stage, the global norm clipped to --clip-grad, the optimizer stepped with the
// scheduled lr, and with --use-distributed-optimizer each replica's share of the optimizer state
// and the all-gather of the updated weights; and that state in checkpoints.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "core/config.h"
#include "model/lr_schedule.h"
#include "model/optimizer.h"
#include "obs/step_stats.h"
#include "runtime/rank_stages.h"

namespace infinipipe {
class GradBuckets;
class ProcessGroups;
class Watchdog;
}  // namespace infinipipe

namespace infinipipe::runtime {

class DistGradReducer;
class DistOptimizer;

// Distributed with tied embeddings and pp > 1, on the first and last stage's ranks: the
// embedding's gradient is summed with the LM head copy's between the two ranks (Megatron's).
bool tied_across_ranks(const Config& cfg, const ProcessGroups* groups);

class RankOptimizer {
 public:
  // Updates the parameters of `stages`, which outlives it. `groups` null: one process. Waits
  // last at most `timeout_s`; `watchdog`, when given, is armed around each reduction.
  RankOptimizer(const Config& cfg, RankStages& stages, const ProcessGroups* groups,
                double timeout_s, Watchdog* watchdog);
  ~RankOptimizer();
  RankOptimizer(const RankOptimizer&) = delete;
  RankOptimizer& operator=(const RankOptimizer&) = delete;

  // dp > 1: the gradient all-reduce the executor starts during backward; null otherwise.
  DistGradReducer* dp_reducer() { return grads_.get(); }
  // Completes it (`during` ends its names: " of iteration 7"), appending one event per bucket to
  // `events`. Returns its seconds: the all-reduce the backwards did not hide (0 without one).
  double dp_finish(const std::string& during, std::vector<obs::EventTiming>& events);

  // The update after `completed` iterations: the tied embedding's gradients joined, the global
  // norm clipped, the optimizer stepped with the lr of that point of the schedule, the tied copy
  // kept bit-identical.
  struct Update {
    double grad_norm = 0;  // before clipping
    double lr = 0;
  };
  Update step(int64_t completed);

  // Every replica saves its own shard (the distributed optimizer's states are split).
  bool every_replica_saves() const { return dist_optimizer_ != nullptr; }
  // The optimizer's state into `shard` (whole states of a split tensor gathered into `storage`,
  // which must live until the shard is written); collective over the replicas when distributed.
  void save(CheckpointShard& shard, std::deque<std::vector<float>>& storage);
  void load(CheckpointReader& reader);

 private:
  void tied_grads_sum();
  void tied_values_copy();
  double grad_norm_clip();

  RankStages& stages_;
  const ProcessGroups* groups_ = nullptr;
  double timeout_s_ = 0;
  Watchdog* watchdog_ = nullptr;
  bool tie_embeddings_ = false;
  double clip_grad_ = 0;
  int64_t global_batch_size_ = 0;
  LrSchedule lr_;
  std::unique_ptr<DistGradReducer> grads_;         // dp > 1: the overlapped gradient all-reduce
  std::unique_ptr<GradBuckets> tied_grads_;        // tied_across_ranks
  std::unique_ptr<DistOptimizer> dist_optimizer_;  // --use-distributed-optimizer and dp > 1
  std::unique_ptr<ParamOptimizer> optimizer_;
};

}  // namespace infinipipe::runtime
