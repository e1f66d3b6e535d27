#include "runlog/trace_record.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_read.h"
#include "runlog/record_fields.h"

namespace infinipipe::runlog {

namespace {

constexpr const char* kSlicePhase = "X";
constexpr const char* kPhaseField = "ph";
constexpr const char* kFormatField = "format";
constexpr const char* kMetadataField = "metadata";
constexpr const char* kEventsField = "traceEvents";

// Required: every field since traces exist. Optional: iterations (since --trace-iterations),
// max_iterations (before it).
template <typename Record, typename Fields>
void trace_metadata_fields(Record& m, Fields& f) {
  f.required(kFormatField, m.format);
  f.required("version", m.version);
  f.required("world_rank", m.world_rank, 0);
  f.required("pp", m.pp, 1);
  f.required("dp", m.dp, 1);
  f.required("stage", m.stage, 0);
  f.required("replica", m.replica, 0);
  f.required("one_process", m.one_process);
  f.required("schedule", m.schedule);
  f.optional("iterations", m.iterations, 0);
  f.optional("max_iterations", m.max_iterations, 0);
  f.required("clock", m.clock);
  f.required("memory", m.memory);
}

// "ph" is written by trace_slice_to_json and checked first by trace_slice_from_json.
template <typename Record, typename Fields>
void trace_slice_fields(Record& s, Fields& f) {
  f.required("name", s.name);
  f.required("cat", s.category);
  f.required("ts", s.ts_us);
  f.required("dur", s.dur_us);
  f.required("pid", s.pid, 0);
  f.required("tid", s.tid, 0);
  f.required("args", s.args);
}

template <typename Record, typename Fields>
void trace_action_args_fields(Record& a, Fields& f) {
  f.required("iteration", a.iteration, 0);
  f.required("chunk", a.chunk, 0);
  f.required("stage", a.stage, 0);
  f.required("replica", a.replica, 0);
  f.required("kind", a.kind);
  f.required("recompute_layers", a.recompute_layers, 0);
  f.required("predicted_s", a.predicted_s);
  f.optional("cpu_s", a.cpu_s);
  f.optional("memory_bytes", a.memory_bytes, 0);
  f.optional("peak_bytes", a.peak_bytes, 0);
}

template <typename Record, typename Fields>
void trace_host_args_fields(Record& a, Fields& f) {
  f.required("iteration", a.iteration, 0);
}

}  // namespace

std::string trace_file_opening(const TraceMetadata& m) {
  return fmt::format("{{\"displayTimeUnit\":\"ms\",\"{}\":{},\"{}\":[", kMetadataField,
                     trace_metadata_to_json(m).dump(), kEventsField);
}

TraceFileParts trace_file_from_json(const nlohmann::json& j, const std::string& path,
                                    const std::string& fix) {
  if (!j.is_object() || !j.contains(kEventsField) || !j[kEventsField].is_array()) {
    fail("{} has no \"{}\" array; it is not a Chrome trace; {}", path, kEventsField, fix);
  }
  TraceFileParts parts;
  parts.metadata =
      trace_metadata_from_json(j.contains(kMetadataField) ? j[kMetadataField] : nlohmann::json(),
                               path + ": " + kMetadataField, fix);
  parts.events = &j[kEventsField];
  return parts;
}

nlohmann::json trace_metadata_to_json(const TraceMetadata& m) {
  return record_to_json(m, [](auto& r, auto& f) { trace_metadata_fields(r, f); });
}

nlohmann::json trace_slice_to_json(const TraceSlice& s) {
  nlohmann::json j = record_to_json(s, [](auto& r, auto& f) { trace_slice_fields(r, f); });
  j[kPhaseField] = kSlicePhase;
  return j;
}

nlohmann::json trace_action_args_to_json(const TraceActionArgs& a) {
  return record_to_json(a, [](auto& r, auto& f) { trace_action_args_fields(r, f); });
}

nlohmann::json trace_host_args_to_json(const TraceHostArgs& a) {
  return record_to_json(a, [](auto& r, auto& f) { trace_host_args_fields(r, f); });
}

TraceMetadata trace_metadata_from_json(const nlohmann::json& j, const std::string& where,
                                       const std::string& fix) {
  const auto format = j.is_object() ? j.find(kFormatField) : j.end();
  if (!j.is_object() || format == j.end() || *format != kTraceFormat) {
    fail("{}: format is {}, not \"{}\": this is not a trace of `infinipipe train --trace`; {}",
         where, !j.is_object() || format == j.end() ? "missing" : json_brief(*format), kTraceFormat,
         fix);
  }
  const TraceMetadata m = record_from_json<TraceMetadata>(
      j, where, "trace metadata", fix, [](auto& r, auto& f) { trace_metadata_fields(r, f); });
  if (m.version != kTraceVersion) {
    fail("{}: trace format version {}; this version of infinipipe reads version {}; {}", where,
         m.version, kTraceVersion, fix);
  }
  return m;
}

std::optional<TraceSlice> trace_slice_from_json(const nlohmann::json& j, const std::string& where,
                                                const std::string& fix) {
  std::string phase;
  RecordReader(j, where, "trace event", fix).required(kPhaseField, phase);
  if (phase != kSlicePhase) return std::nullopt;
  RecordReader r(j, where, "trace event", fix);
  TraceSlice s;
  trace_slice_fields(s, r);
  r.required(kPhaseField, phase);
  r.finish();
  return s;
}

TraceActionArgs trace_action_args_from_json(const nlohmann::json& j, const std::string& where,
                                            const std::string& fix) {
  return record_from_json<TraceActionArgs>(
      j, where, "args object of an action event", fix,
      [](auto& r, auto& f) { trace_action_args_fields(r, f); });
}

TraceHostArgs trace_host_args_from_json(const nlohmann::json& j, const std::string& where,
                                        const std::string& fix) {
  return record_from_json<TraceHostArgs>(j, where, "args object of a host event", fix,
                                         [](auto& r, auto& f) { trace_host_args_fields(r, f); });
}

}  // namespace infinipipe::runlog
