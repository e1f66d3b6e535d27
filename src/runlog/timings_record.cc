#include "runlog/timings_record.h"

#include <fmt/format.h>

#include "core/error.h"
#include "runlog/record_fields.h"

namespace infinipipe::runlog {

namespace {

template <typename Record, typename Fields>
void timed_action_fields(Record& a, Fields& f) {
  f.required("rank", a.rank, 0);
  f.required("stage", a.stage, 0);
  f.required("kind", a.kind);
  f.required("chunk", a.chunk, 0);
  f.required("recompute_layers", a.recompute_layers, 0);
  f.required("predicted_s", a.predicted_s);
  f.required("start_s", a.start_s);
  f.required("end_s", a.end_s);
}

template <typename Record, typename Fields>
void timings_record_fields(Record& r, Fields& f) {
  f.required("iteration", r.iteration, 0);
  f.required("predicted_step_seconds", r.predicted_step_seconds);
}

// The array of TimedAction records.
constexpr const char* kTimingsActions = "actions";

}  // namespace

nlohmann::json timings_record_to_json(const ActionTimingsRecord& r) {
  nlohmann::json actions = nlohmann::json::array();
  for (const TimedAction& a : r.actions) {
    actions.push_back(record_to_json(a, [](auto& x, auto& f) { timed_action_fields(x, f); }));
  }
  RecordWriter w;
  timings_record_fields(r, w);
  w.required(kTimingsActions, actions);
  return w.take();
}

ActionTimingsRecord timings_record_from_json(const nlohmann::json& j, const std::string& where,
                                             const std::string& fix) {
  RecordReader r(j, where, "timings record", fix);
  ActionTimingsRecord out;
  nlohmann::json actions;
  timings_record_fields(out, r);
  r.required(kTimingsActions, actions);
  r.finish();
  if (!actions.is_array()) {
    fail("{}: field \"{}\" of the timings record must be an array; {}", where, kTimingsActions,
         fix);
  }
  for (size_t i = 0; i < actions.size(); ++i) {
    out.actions.push_back(record_from_json<TimedAction>(
        actions[i], fmt::format("{}: actions[{}]", where, i), "timed action", fix,
        [](auto& x, auto& f) { timed_action_fields(x, f); }));
  }
  return out;
}

}  // namespace infinipipe::runlog
