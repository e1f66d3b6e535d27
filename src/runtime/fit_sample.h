// What the online cost fit learns from one measured action (docs/cost-model.md, "Ranks sharing
// cores"): its own time, the time its rank would take alone on a core.
#pragma once

#include "cost/core_sharing.h"
#include "obs/step_stats.h"

namespace infinipipe::runtime {

// The action's interval where its rank has a core of its own (`host` null, or its node holds no
// more ranks than cores). Where ranks share the node's cores, the interval also holds the time
// the rank waited for a core, which the replay adds back by sharing them: then the CPU time the
// rank's thread computed, when that is the whole action's (`threads` == 1: with more OpenMP
// threads the main thread's clock misses the others') and it was measured; never more than the
// interval.
double action_fit_seconds(const obs::ActionTiming& t, const cost::RankHost* host, int threads);

}  // namespace infinipipe::runtime
