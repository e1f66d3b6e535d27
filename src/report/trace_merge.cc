#include "report/trace_merge.h"

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/output_file.h"
#include "core/input_file.h"
#include "core/json_read.h"
#include "runlog/trace_record.h"

namespace infinipipe::report {

namespace {

// A trace file run_trace_load has read already: an error now means it changed since.
nlohmann::json trace_file_reread(const std::string& path) {
  constexpr const char* kAgain = "run `infinipipe report` again";
  try {
    return json_parse(input_file_read(path, input_kind::kRunTrace, InputLinks::refuse), path);
  } catch (const Error& e) {
    fail("{} changed while the trace was merged ({}); {}", path, e.what(), kAgain);
  }
}

}  // namespace

nlohmann::json trace_merge(const RunTrace& trace) {
  nlohmann::json ranks = nlohmann::json::array();
  nlohmann::json events = nlohmann::json::array();
  for (const TraceFileInfo& f : trace.files) {
    nlohmann::json j = trace_file_reread(f.path);
    const runlog::TraceFileParts parts =
        runlog::trace_file_from_json(j, f.path, "run `infinipipe report` again");
    ranks.push_back(runlog::trace_metadata_to_json(parts.metadata));
    for (const nlohmann::json& e : *parts.events) events.push_back(e);
  }
  return {{"displayTimeUnit", "ms"},
          {"metadata",
           {{"format", "infinipipe-merged-trace"},
            {"version", 1},
            {"clock", "steady, microseconds since the run's start (ranks aligned by a barrier)"},
            {"ranks", std::move(ranks)}}},
          {"traceEvents", std::move(events)}};
}

void trace_merge_save(const RunTrace& trace, const std::string& path) {
  const nlohmann::json merged = trace_merge(trace);
  output_file_write(path, merged.dump() + "\n", "--merge-trace");
}

}  // namespace infinipipe::report
