// One rank's share of a distributed training step: which sequences of the global batch its
// data-parallel replica runs, executing the replica's plan over MPI, and the reductions that
// make the result the single-process one (invariant 1 of docs/architecture.md): parameter gradients
// summed over dp (each replica scaled its loss by 1 / global predicted tokens), loss sums over the
// world.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_groups.h"
#include "comm/mpi_p2p.h"
#include "comm/mpi_watchdog.h"
#include "core/config.h"
#include "cost/cost_model.h"
#include "model/engine.h"
#include "plan/plan.h"
#include "runtime/executor.h"

namespace infinipipe::runtime {

// Splits the global batch over dp replicas as plan::balance_replicas does (by cost, for cfg's
// pipeline and budget) and returns, per replica, the indices of its sequences in `lengths`, in
// the order balance_replicas gives them. Deterministic, so every rank computes the same split.
std::vector<std::vector<int32_t>> dist_replica_split(std::span<const int64_t> lengths, int64_t dp,
                                                     const cost::CostModel& cm, const Config& cfg);

// The loss sum and predicted tokens of `stats`, summed over every rank of the world when
// distributed (`groups`; each wait at most `timeout_s`, `what` ends its names: " of iteration 7").
std::pair<double, int64_t> world_loss(std::span<const obs::StepStats> stats,
                                      const ProcessGroups* groups, double timeout_s,
                                      const std::string& what);

// The data-parallel gradient sum of one rank, overlapped with backward. Parameters are bucketed
// in the order backward makes them final (LM head and final norm, layers last to first, the
// embedding; a later stage's first), the same on every replica of a stage. The executor tells
// part_done() as each layer's backward ends; in the rank's last backward of a stage that layer's
// gradients are final, which starts every bucket that became complete (in bucket order), and
// between layers in-flight buckets are pushed along. finish() completes the rest.
class DistGradReducer {
 public:
  // engines: by global stage, null for other ranks' stages (as the executor takes them); each
  // parameter counts once by name (a tied copy is summed by the trainer afterwards).
  DistGradReducer(const ProcessGroups& groups, std::span<StageEngine* const> engines,
                  double timeout_s, int64_t bucket_bytes = GradBuckets::kDefaultBucketBytes);

  // The executor's hook (RankExecutor::set_grad_part_done).
  void part_done(int32_t stage, int64_t part, bool final);
  // Before the step's first action: the clock origin of the step's events (ActionTiming's).
  void step_begin(RankExecutor::Clock::time_point t0) { t0_ = t0; }
  // Waits for every bucket, writes the sums into the gradients and appends one "allreduce"
  // event per bucket ("bucket 3 (4.0 MiB)"), seconds since step_begin's t0, to `events`.
  void finish(const std::string& during, std::vector<obs::EventTiming>& events);

  const GradBuckets& buckets() const { return buckets_; }

 private:
  GradBuckets buckets_;
  std::map<std::pair<int32_t, int64_t>, std::vector<int>> ids_;  // (stage, part) -> gradients
  RankExecutor::Clock::time_point t0_ = RankExecutor::Clock::now();
};

// Runs this rank's action list of `plan` (its pipeline rank is p2p.layout().stage) with an
// MpiStageLink over p2p. `engines` is indexed by global stage and holds this rank's stages.
// Receive buffers are charged to `tracker`. A watchdog, when given, is armed with each action
// ("iteration 3: forward of chunk 5 on stage 1"), so a killed or stuck job says where each rank
// stood. With `grads` (dp > 1) the gradient all-reduce starts during backward; call
// grads->finish() after this returns. `action_hook` (tests): the executor's.
obs::StepStats dist_execute_plan(const plan::Plan& plan, std::span<StageEngine* const> engines,
                                 P2p& p2p, int64_t hidden_size, MemoryTracker& tracker,
                                 std::span<const std::vector<int32_t>> sequences, double loss_scale,
                                 Watchdog* watchdog = nullptr, int64_t iteration = 0,
                                 DistGradReducer* grads = nullptr,
                                 const ActionHook& action_hook = {});

}  // namespace infinipipe::runtime
