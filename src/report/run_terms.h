// The trajectory of the per-rank time terms over a traced run: the coefficients each iteration's
// plan timed each pipeline rank with (Plan::rank_time_terms, docs/cost-model.md "Per-rank
// costs"), so a report shows how the online refit moved them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "report/run_trace.h"

namespace infinipipe::report {

// Markdown: per iteration of replica 0, each rank's α2 (ns per token), β1 (ms), κb and κr.
// "" when no plan of the run carries per-rank terms (--cost-model-update off, one process).
std::string run_rank_terms_table(const RunTrace& trace);
// [{"iteration": i, "replica": r, "ranks": [{"alpha1": .., "alpha2": .., ...} per rank]}] over
// every plan that carries them, in (iteration, replica) order; empty array when none does.
nlohmann::json run_rank_terms_json(const RunTrace& trace);

}  // namespace infinipipe::report
