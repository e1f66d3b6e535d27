// The stages a training rank holds (stage s of the layout runs on pipeline rank s % pp): their
// engines, their parameters by global name, and the memory tracker they charge.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "model/engine.h"
#include "model/memory.h"
#include "model/optimizer.h"
#include "model/params.h"
#include "plan/plan.h"

namespace infinipipe::runtime {

class RankStages {
 public:
  // The layout the planner uses for cfg's schedule (pp stages, or pp × vpp virtual stages), by
  // `prior`'s cost: the embedding and the LM head weigh in. This rank (pipeline rank
  // `pipeline_rank`) builds its stages from cfg's seed. `remote_tied_copy`: it holds the last
  // stage's copy of a tied embedding whose first stage runs on another rank.
  RankStages(const Config& cfg, const cost::CostModel& prior, int32_t pipeline_rank,
             bool remote_tied_copy);
  RankStages(const RankStages&) = delete;
  RankStages& operator=(const RankStages&) = delete;

  const std::vector<plan::StageSpec>& layout() const { return layout_; }
  // By global stage, null for other ranks' stages: what the executor takes.
  std::span<StageEngine* const> engines() const { return engine_ptrs_; }
  // This rank's stages, first to last.
  const std::vector<std::unique_ptr<StageEngine>>& held() const { return engines_; }
  MemoryTracker& tracker() { return tracker_; }
  void grads_zero();

  // Every parameter once, by global name (a tied LM head's copy on a later stage is left out,
  // also when that stage runs on another rank than the embedding: the first stage's rank has it).
  std::vector<ParamRef> params();
  // params() plus this rank's remote tied copy, if any: what this rank trains.
  std::vector<ParamRef> params_local();
  // Every stage's parameters, tied copies included: what a checkpoint's weights load into.
  std::vector<ParamRef> params_every_stage();
  std::vector<OptimTensor> optim_tensors();  // of params_local()
  // The last stage's copy of the tied embedding when the first stage runs on another rank (it
  // is trained here like any parameter, but counted and saved by the first stage's rank); null
  // otherwise. tied_copy_values(): its values, empty without one.
  Param* tied_remote_copy();
  std::span<const float> tied_copy_values();

 private:
  MemoryTracker tracker_;  // before the engines, which charge it
  std::vector<plan::StageSpec> layout_;
  std::vector<std::unique_ptr<StageEngine>> engines_;
  std::vector<StageEngine*> engine_ptrs_;
  bool remote_tied_copy_ = false;
};

}  // namespace infinipipe::runtime
