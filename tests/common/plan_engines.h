// The StageEngines that run a plan's stages, all from one seed (so every stage starts from the
// weights one whole-model engine of that seed has): every stage, or those of one pipeline rank.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/engine.h"
#include "plan/plan.h"

namespace infinipipe::testing {

struct PlanEngines {
  std::vector<std::unique_ptr<StageEngine>> owned;
  std::vector<StageEngine*> by_stage;  // one per plan stage; null where another rank runs it
};

// rank < 0: every stage; else only the stages pipeline rank `rank` runs.
inline PlanEngines plan_engines(const ModelConfig& model, const plan::Plan& p, uint64_t seed,
                                MemoryTracker& tracker, int32_t rank = -1) {
  PlanEngines e;
  e.by_stage.assign(p.stages.size(), nullptr);
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const plan::StageSpec& st = p.stages[s];
    if (rank >= 0 && p.rank_of_stage(static_cast<int32_t>(s)) != rank) continue;
    e.owned.push_back(std::make_unique<StageEngine>(
        model, StageRange{st.first_layer, st.num_layers, st.has_embedding, st.has_lm_head}, seed,
        tracker));
    e.by_stage[s] = e.owned.back().get();
  }
  return e;
}

}  // namespace infinipipe::testing
