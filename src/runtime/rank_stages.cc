#include "runtime/rank_stages.h"

#include <map>
#include <string>

#include "plan/schedule_table.h"
#include "plan/stage_layout.h"

namespace infinipipe::runtime {

RankStages::RankStages(const Config& cfg, const cost::CostModel& prior, int32_t pipeline_rank,
                       bool remote_tied_copy)
    : remote_tied_copy_(remote_tied_copy) {
  const int32_t pp = static_cast<int32_t>(cfg.parallel.pipeline_parallel);
  layout_ = plan::stage_layout_by_cost(prior, pp, plan::schedule_vpp(cfg.parallel));
  const uint64_t seed = static_cast<uint64_t>(cfg.training.seed);
  for (size_t i = 0; i < layout_.size(); ++i) {
    const plan::StageSpec& s = layout_[i];
    if (static_cast<int32_t>(i) % pp != pipeline_rank) {
      engine_ptrs_.push_back(nullptr);
      continue;
    }
    const StageRange r{s.first_layer, s.num_layers, s.has_embedding, s.has_lm_head};
    engines_.push_back(std::make_unique<StageEngine>(cfg.model, r, seed, tracker_));
    engine_ptrs_.push_back(engines_.back().get());
  }
}

void RankStages::grads_zero() {
  for (auto& e : engines_) e->params().grads_zero();
}

std::vector<ParamRef> RankStages::params_local() {
  std::vector<ParamRef> out;
  std::map<std::string, bool> seen;
  for (auto& e : engines_) {
    for (ParamRef& p : e->params().params()) {
      if (seen.emplace(p.name, true).second) out.push_back(p);
    }
  }
  return out;
}

std::vector<ParamRef> RankStages::params() {
  std::vector<ParamRef> out = params_local();
  if (Param* copy = tied_remote_copy()) {
    std::erase_if(out, [copy](const ParamRef& p) { return p.value == copy->value.data(); });
  }
  return out;
}

std::vector<ParamRef> RankStages::params_every_stage() {
  std::vector<ParamRef> all;
  for (auto& e : engines_) {
    for (ParamRef& p : e->params().params()) all.push_back(p);
  }
  return all;
}

std::vector<OptimTensor> RankStages::optim_tensors() {
  std::vector<OptimTensor> out;
  for (const ParamRef& p : params_local()) {
    const size_t n = static_cast<size_t>(p.numel);
    out.push_back({p.name, p.shape, {p.value, n}, {p.grad, n}});
  }
  return out;
}

Param* RankStages::tied_remote_copy() {
  return remote_tied_copy_ ? engines_.back()->params().lm_head() : nullptr;
}

std::span<const float> RankStages::tied_copy_values() {
  Param* copy = tied_remote_copy();
  if (copy == nullptr) return {};
  return {copy->value.data(), static_cast<size_t>(copy->value.numel())};
}

}  // namespace infinipipe::runtime
