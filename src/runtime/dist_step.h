// One rank's share of a distributed training step: which sequences of the global batch its
// data-parallel replica runs, executing the replica's plan over MPI, and the reductions that
// make the result the single-process one (DESIGN.md invariant 1): parameter gradients summed over
// dp (each replica scaled its loss by 1 / global predicted tokens), loss sums over the world.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cost/cost_model.h"
#include "model/engine.h"
#include "plan/plan.h"
#include "runtime/executor.h"
#include "runtime/mpi_groups.h"
#include "runtime/mpi_p2p.h"
#include "runtime/mpi_watchdog.h"

namespace infinipipe::runtime {

// Splits the global batch over dp replicas as plan::balance_replicas does (by cost) and returns,
// per replica, the indices of its sequences in `lengths`, in the order balance_replicas gives
// them. Deterministic, so every rank computes the same split.
std::vector<std::vector<int32_t>> dist_replica_split(std::span<const int64_t> lengths, int64_t dp,
                                                     const cost::CostModel& cm);

// Runs this rank's action list of `plan` (its pipeline rank is p2p.layout().stage) with an
// MpiStageLink over p2p. `engines` is indexed by global stage and holds this rank's stages.
// Receive buffers are charged to `tracker`. A watchdog, when given, is armed with each action
// ("iteration 3: forward of chunk 5 on stage 1"), so a killed or stuck job says where each rank
// stood.
StepStats dist_execute_plan(const plan::Plan& plan, std::span<StageEngine* const> engines, P2p& p2p,
                            int64_t hidden_size, MemoryTracker& tracker,
                            std::span<const std::vector<int32_t>> sequences, double loss_scale,
                            Watchdog* watchdog = nullptr, int64_t iteration = 0);

// Sums the gradients of `params` over the replicas of this stage (GradBuckets, SUM).
void dist_grads_allreduce(const ProcessGroups& groups, std::span<const ParamRef> params,
                          double timeout_s);

}  // namespace infinipipe::runtime
