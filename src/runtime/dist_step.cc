#include "runtime/dist_step.h"

#include <map>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/planner.h"
#include "runtime/mpi_allreduce.h"
#include "runtime/mpi_stage_link.h"

namespace infinipipe::runtime {

std::vector<std::vector<int32_t>> dist_replica_split(std::span<const int64_t> lengths, int64_t dp,
                                                     const cost::CostModel& cm) {
  const std::vector<std::vector<int64_t>> shares = plan::balance_replicas(lengths, dp, cm);
  // balance_replicas hands out lengths: equal lengths are interchangeable, so each takes the
  // first unused sequence of that length, in replica order.
  std::map<int64_t, std::vector<int32_t>> by_length;
  for (size_t i = lengths.size(); i-- > 0;)
    by_length[lengths[i]].push_back(static_cast<int32_t>(i));
  std::vector<std::vector<int32_t>> out(shares.size());
  for (size_t r = 0; r < shares.size(); ++r) {
    for (int64_t len : shares[r]) {
      auto it = by_length.find(len);
      if (it == by_length.end() || it->second.empty()) {
        fail("dist: balance_replicas gave replica {} a sequence of length {} the batch lacks", r,
             len);
      }
      out[r].push_back(it->second.back());
      it->second.pop_back();
    }
  }
  for (const auto& [len, left] : by_length) {
    if (!left.empty()) {
      fail("dist: balance_replicas left {} sequences of length {} to no replica", left.size(), len);
    }
  }
  return out;
}

StepStats dist_execute_plan(const plan::Plan& plan, std::span<StageEngine* const> engines, P2p& p2p,
                            int64_t hidden_size, MemoryTracker& tracker,
                            std::span<const std::vector<int32_t>> sequences, double loss_scale,
                            Watchdog* watchdog, int64_t iteration) {
  MpiStageLink link(p2p, hidden_size, tracker);
  RankExecutor ex(plan, p2p.layout().stage, engines, link, sequences, loss_scale);
  while (!ex.done()) {
    if (watchdog != nullptr) {
      const plan::Action& a = ex.next_action();
      watchdog->arm(fmt::format("iteration {}: {} of chunk {} on stage {}", iteration,
                                plan::action_kind_name(a.kind), a.chunk, a.stage));
    }
    ex.run_next();
    p2p.progress();  // large messages move only while the receiver calls into MPI
  }
  if (watchdog != nullptr) watchdog->disarm();
  return ex.stats();
}

void dist_grads_allreduce(const ProcessGroups& groups, std::span<const ParamRef> params,
                          double timeout_s) {
  if (groups.layout().dp == 1) return;
  GradBuckets buckets(groups.dp_comm(), timeout_s, GradReduceOp::sum);
  // Reverse order: the order backward finishes them, the same on every replica of the stage.
  for (size_t i = params.size(); i-- > 0;)
    buckets.add(params[i].name, params[i].grad, params[i].numel);
  buckets.finish("the data-parallel gradient all-reduce");
}

}  // namespace infinipipe::runtime
