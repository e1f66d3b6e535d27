#include "runtime/dist_step.h"

#include <chrono>
#include <map>
#include <string>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_comm.h"
#include "core/error.h"
#include "plan/planner.h"
#include "plan/schedule_replay.h"
#include "runtime/mpi_stage_link.h"

namespace infinipipe::runtime {

std::pair<double, int64_t> world_loss(std::span<const obs::StepStats> stats,
                                      const ProcessGroups* groups, double timeout_s,
                                      const std::string& what) {
  double loss_sum = 0;
  int64_t tokens = 0;
  for (const obs::StepStats& s : stats) {
    loss_sum += s.loss_sum;
    tokens += s.predicted_tokens;
  }
  if (groups) {
    const MPI_Comm world = groups->comm().world();
    loss_sum = allreduce_sum(world, loss_sum, timeout_s, "the loss sum" + what);
    tokens = allreduce_sum(world, tokens, timeout_s, "the token count" + what);
  }
  return {loss_sum, tokens};
}

std::vector<std::vector<int32_t>> dist_replica_split(std::span<const int64_t> lengths, int64_t dp,
                                                     const cost::CostModel& cm, const Config& cfg) {
  const std::vector<std::vector<int64_t>> shares = plan::balance_replicas(lengths, dp, cm, cfg);
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

obs::StepStats dist_execute_plan(const plan::Plan& plan, std::span<StageEngine* const> engines,
                                 P2p& p2p, int64_t hidden_size, MemoryTracker& tracker,
                                 std::span<const std::vector<int32_t>> sequences, double loss_scale,
                                 Watchdog* watchdog, int64_t iteration, DistGradReducer* grads,
                                 const ActionHook& action_hook) {
  MpiStageLink link(p2p, hidden_size, tracker);
  const auto t0 = RankExecutor::Clock::now();
  RankExecutor ex(plan, p2p.layout().stage, engines, link, sequences, loss_scale, t0);
  ex.set_action_hook(action_hook);
  if (grads != nullptr) {
    grads->step_begin(t0);
    ex.set_grad_part_done(
        [grads](int32_t stage, int64_t part, bool final) { grads->part_done(stage, part, final); });
  }
  const int32_t rank = p2p.layout().stage;
  const std::vector<int32_t> hold = plan::send_hold_start(plan)[static_cast<size_t>(rank)];
  for (int32_t index = 0; !ex.done(); ++index) {
    if (watchdog != nullptr) {
      const plan::Action& a = ex.next_action();
      watchdog->arm(fmt::format("iteration {}: {} of chunk {} on stage {}", iteration,
                                plan::action_kind_name(a.kind), a.chunk, a.stage));
    }
    link.action_begin(ex.next_action(), index, hold[static_cast<size_t>(index)]);
    ex.run_next();
    link.progress();  // large messages move only inside MPI calls; frees sent buffers
  }
  if (watchdog != nullptr) watchdog->disarm();
  return ex.stats();
}

DistGradReducer::DistGradReducer(const ProcessGroups& groups, std::span<StageEngine* const> engines,
                                 double timeout_s, int64_t bucket_bytes)
    : buckets_(groups.dp_comm(), timeout_s, GradReduceOp::sum, bucket_bytes) {
  // Every parameter once, in stage order (as Trainer::params()), then registered in reverse:
  // the order backward finalises them, identical on every replica of this stage.
  std::vector<const ParamRef*> order;
  std::vector<std::vector<ParamRef>> refs(engines.size());
  std::map<std::string, bool> seen;
  for (size_t s = 0; s < engines.size(); ++s) {
    if (engines[s] == nullptr) continue;
    refs[s] = engines[s]->params().params();
    for (const ParamRef& p : refs[s]) {
      if (seen.emplace(p.name, true).second) order.push_back(&p);
    }
  }
  std::map<const float*, int> id_of;
  for (size_t i = order.size(); i-- > 0;) {
    const ParamRef& p = *order[i];
    id_of[p.grad] = buckets_.add(p.name, p.grad, p.numel);
  }
  // Which gradients each part of a stage finalises.
  auto part_add = [&](int32_t stage, int64_t part, const Param* p) {
    if (p == nullptr) return;
    auto it = id_of.find(p->grad.data());
    if (it != id_of.end()) ids_[{stage, part}].push_back(it->second);
  };
  for (size_t s = 0; s < engines.size(); ++s) {
    if (engines[s] == nullptr) continue;
    ModelParams& mp = engines[s]->params();
    const int32_t st = static_cast<int32_t>(s);
    for (int64_t l = 0; l < mp.num_layers(); ++l) {
      const LayerParams& lp = mp.layer(l);
      for (const Param* p :
           {lp.input_norm, lp.wq, lp.wk, lp.wv, lp.wo, lp.post_norm, lp.wgate, lp.wup, lp.wdown}) {
        part_add(st, l, p);
      }
    }
    part_add(st, StageEngine::kBackwardPartEmbedding, mp.embedding());
    part_add(st, RankExecutor::kGradPartHead, mp.final_norm());
    // A tied head is the embedding: final only after the embedding's backward.
    if (mp.lm_head() != mp.embedding()) part_add(st, RankExecutor::kGradPartHead, mp.lm_head());
  }
}

void DistGradReducer::part_done(int32_t stage, int64_t part, bool final) {
  if (final) {
    auto it = ids_.find({stage, part});
    if (it != ids_.end()) {
      for (int id : it->second) buckets_.mark_ready(id);
    }
  }
  buckets_.progress();
}

void DistGradReducer::finish(const std::string& during, std::vector<obs::EventTiming>& events) {
  buckets_.finish(during);
  auto since = [&](RankExecutor::Clock::time_point t) {
    return std::chrono::duration<double>(t - t0_).count();
  };
  for (const GradBuckets::BucketTiming& b : buckets_.last_timings()) {
    events.push_back({"allreduce",
                      fmt::format("bucket {} ({:.1f} MiB)", b.bucket,
                                  static_cast<double>(b.bytes) / double(1 << 20)),
                      since(b.start), since(b.end)});
  }
}

}  // namespace infinipipe::runtime
