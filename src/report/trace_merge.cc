#include "report/trace_merge.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace infinipipe::report {

namespace {

nlohmann::json trace_file_parse(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(s.str(), nullptr, false);
  if (!in || j.is_discarded() || !j.contains("traceEvents") || !j["traceEvents"].is_array()) {
    fail("{} changed while the trace was merged; run `infinipipe report` again", path);
  }
  return j;
}

}  // namespace

nlohmann::json trace_merge(const RunTrace& trace) {
  nlohmann::json ranks = nlohmann::json::array();
  nlohmann::json events = nlohmann::json::array();
  for (const TraceFileInfo& f : trace.files) {
    nlohmann::json j = trace_file_parse(f.path);
    ranks.push_back(j.contains("metadata") ? j["metadata"] : nlohmann::json::object());
    for (nlohmann::json& e : j["traceEvents"]) events.push_back(std::move(e));
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
  std::ofstream out(path);
  out << merged.dump() << "\n";
  out.flush();
  if (!out) fail("cannot write {}: check that its directory exists and is writable", path);
}

}  // namespace infinipipe::report
