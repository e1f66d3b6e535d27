// Eq. 14: grouping EPP's chunk list into consecutive 1F1B pipelines (cuts only between
// sequences), shared by the EPP search and its explanation.
#pragma once

#include <cstdint>
#include <vector>

#include "cost/cost_model.h"
#include "plan/plan.h"

namespace infinipipe::plan {

// Every allowed cut: one pipeline per run of chunks linked by a cut sequence.
std::vector<int32_t> finest_grouping(const std::vector<Chunk>& chunks);

}  // namespace infinipipe::plan
