#include "runtime/rank_optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_groups.h"
#include "comm/mpi_watchdog.h"
#include "core/error.h"
#include "runtime/dist_optimizer.h"
#include "runtime/dist_step.h"
#include "runtime/seconds_since.h"

namespace infinipipe::runtime {

bool tied_across_ranks(const Config& cfg, const ProcessGroups* groups) {
  return groups != nullptr && groups->layout().pp > 1 && cfg.model.tie_embeddings &&
         groups->embedding_comm() != MPI_COMM_NULL;
}

// What a distributed rank reduces beyond its pipeline: the dp gradient all-reduce, the tied
// embedding's gradient between first and last stage, and the distributed optimizer's share. The
// optimizer's state is charged to the memory tracker as it grows and shrinks.
RankOptimizer::RankOptimizer(const Config& cfg, RankStages& stages, const ProcessGroups* groups,
                             double timeout_s, Watchdog* watchdog)
    : stages_(stages),
      groups_(groups),
      timeout_s_(timeout_s),
      watchdog_(watchdog),
      tie_embeddings_(cfg.model.tie_embeddings),
      clip_grad_(cfg.training.clip_grad),
      global_batch_size_(cfg.training.global_batch_size),
      lr_(LrSchedule::from_config(cfg.training)) {
  const OptimizerOptions oo = OptimizerOptions::from_config(cfg.training);
  oo.validate();
  if (groups_ && groups_->layout().dp > 1)
    grads_ = std::make_unique<DistGradReducer>(*groups_, stages_.engines(), timeout_s_);
  if (tied_across_ranks(cfg, groups_)) {
    // Both ends build it at once (it duplicates the communicator, a collective of the two).
    Param* tied = groups_->layout().is_first_stage() ? stages_.held().front()->params().embedding()
                                                     : stages_.held().back()->params().lm_head();
    if (tied == nullptr)
      fail("internal: stage {} holds no tied embedding", groups_->layout().stage);
    tied_grads_ = std::make_unique<GradBuckets>(groups_->embedding_comm(), timeout_s_);
    tied_grads_->add(tied->name, tied->grad.data(), tied->grad.numel());
  }
  if (groups_ && groups_->layout().dp > 1 && cfg.parallel.use_distributed_optimizer)
    dist_optimizer_ = std::make_unique<DistOptimizer>(groups_->dp_comm(), timeout_s_);
  MemoryTracker& tracker = stages_.tracker();
  optimizer_ = std::make_unique<ParamOptimizer>(oo, [&tracker](int64_t delta) {
    if (delta >= 0) {
      tracker.charge(MemCategory::mem_optimizer, delta);
    } else {
      tracker.release(MemCategory::mem_optimizer, -delta);
    }
  });
}

RankOptimizer::~RankOptimizer() = default;

double RankOptimizer::dp_finish(const std::string& during, std::vector<obs::EventTiming>& events) {
  if (!grads_) return 0;
  if (watchdog_) watchdog_->arm("the gradient all-reduce" + during);
  const auto t = std::chrono::steady_clock::now();
  grads_->finish("the data-parallel gradient all-reduce" + during, events);
  const double seconds = seconds_since(t);
  if (watchdog_) watchdog_->disarm();
  return seconds;
}

// Every parameter, or with the distributed optimizer this replica's share of them, after which
// the replicas exchange the updated weights.
RankOptimizer::Update RankOptimizer::step(int64_t completed) {
  Update u;
  tied_grads_sum();
  u.grad_norm = grad_norm_clip();
  u.lr = lr_.lr_at(completed * global_batch_size_);
  const std::vector<OptimTensor> tensors = stages_.optim_tensors();
  if (!dist_optimizer_) {
    optimizer_->step(tensors, u.lr);
  } else {
    optimizer_->step(dist_optimizer_->owned(tensors), u.lr);
    const std::string during = fmt::format("iteration {}", completed + 1);
    if (watchdog_) watchdog_->arm("the distributed optimizer's all-gather of " + during);
    dist_optimizer_->gather_weights(tensors, during);
    if (watchdog_) watchdog_->disarm();
  }
  tied_values_copy();
  return u;
}

// With tied embeddings and several stages, the last stage holds its own copy of the embedding:
// its gradient joins the first stage's before the update. In one process the update is then
// copied; across ranks both ends sum the two gradients (after the dp all-reduce, so each holds
// the global gradient) and apply the identical update, which keeps the copies bit-identical.
void RankOptimizer::tied_grads_sum() {
  if (tied_grads_) {
    if (watchdog_) watchdog_->arm("the tied embedding's gradient all-reduce");
    tied_grads_->finish("the tied embedding's gradient all-reduce (first and last stage)");
    if (watchdog_) watchdog_->disarm();
    return;
  }
  const auto& held = stages_.held();
  if (!tie_embeddings_ || held.size() < 2) return;
  Param* primary = held.front()->params().embedding();
  Param* copy = held.back()->params().lm_head();
  if (primary == nullptr || copy == nullptr || primary == copy) return;
  for (int64_t i = 0; i < primary->grad.numel(); ++i)
    primary->grad.data()[i] += copy->grad.data()[i];
}

void RankOptimizer::tied_values_copy() {
  const auto& held = stages_.held();
  if (tied_grads_ || !tie_embeddings_ || held.size() < 2) return;
  Param* primary = held.front()->params().embedding();
  Param* copy = held.back()->params().lm_head();
  if (primary == nullptr || copy == nullptr || primary == copy) return;
  std::copy(primary->value.data(), primary->value.data() + primary->value.numel(),
            copy->value.data());
}

// Clips to --clip-grad by the global norm: squares summed over this rank's parameters, then over
// the pipeline (dp replicas hold the same reduced gradients); a tied copy counts once, on the
// first stage. Returns the norm before clipping.
double RankOptimizer::grad_norm_clip() {
  std::vector<OptimTensor> tensors = stages_.optim_tensors();
  if (!groups_) return grad_clip_norm(tensors, clip_grad_);
  std::vector<OptimTensor> counted = tensors;
  if (Param* copy = stages_.tied_remote_copy()) {
    std::erase_if(counted,
                  [copy](const OptimTensor& t) { return t.value.data() == copy->value.data(); });
  }
  double sq = grad_sum_squares(counted);
  sq = allreduce_sum(groups_->pp_comm(), sq, timeout_s_, "the squared gradient norm");
  const double norm = std::sqrt(sq);
  grad_apply_scale(tensors, grad_clip_scale(norm, clip_grad_));
  return norm;
}

void RankOptimizer::save(CheckpointShard& shard, std::deque<std::vector<float>>& storage) {
  shard.optimizer = optimizer_.get();
  if (!dist_optimizer_) return;
  // The tied copy's state is the embedding's, saved by the first stage.
  const float* copy = stages_.tied_copy_values().data();
  shard.optimizer_states = dist_optimizer_->states_for_save(
      stages_.optim_tensors(), *optimizer_,
      [copy](const OptimTensor& t) { return copy == nullptr || t.value.data() != copy; }, storage);
}

// A tied copy on this rank is trained here too: it takes the embedding's state.
void RankOptimizer::load(CheckpointReader& reader) {
  const std::vector<CheckpointTarget> unique = checkpoint_targets(stages_.params_local());
  if (dist_optimizer_) {
    reader.load_optimizer(dist_optimizer_->load_slices(unique), *optimizer_);
  } else {
    reader.load_optimizer(unique, *optimizer_);
  }
}

}  // namespace infinipipe::runtime
