// One Chrome trace of a whole run (`infinipipe report RUN_DIR --merge-trace FILE`): every rank's
// trace file of RUN_DIR in one, for Perfetto. Each rank stays its own process (pid = world rank),
// its lanes keep their names, and the flows of sends and receives pair across ranks (their ids
// are unique over the run). Timestamps are kept as the ranks wrote them: they share one clock
// origin, taken after a barrier at the start of the run (docs/tracing.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "report/run_trace.h"

namespace infinipipe::report {

// The merged trace of the run `trace` was loaded from (run_trace_load checked its files: one
// run, every rank present). Error if a file changed since and no longer parses.
nlohmann::json trace_merge(const RunTrace& trace);

// Writes trace_merge(trace) to `path`; Error naming the path when it cannot be written.
void trace_merge_save(const RunTrace& trace, const std::string& path);

}  // namespace infinipipe::report
