// Hostile trace and metrics files: clear Errors, never a library exception; and schema drift (a
// field missing, renamed or unknown) is an Error naming the field, the file and the line or event,
// never a silent default.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error_text.h"
#include "core/error.h"
#include "report/run_trace.h"
#include "runlog/metrics_record.h"
#include "runlog/trace_record.h"

namespace infinipipe::report {
namespace {

using json = nlohmann::json;

std::string metrics_error(const std::string& text) {
  return testing::error_text([&] { run_metrics_parse(text, "metrics.jsonl"); });
}

// One complete metrics line, as `train` writes it.
std::string metrics_line(int64_t iteration, void (*change)(json&) = nullptr) {
  runlog::IterationMetrics m;
  m.iteration = iteration;
  m.loss = 2.5;
  json j = runlog::metrics_record_to_json(m);
  if (change) change(j);
  return j.dump() + "\n";
}

TEST(RunTraceHostile, MetricsRecordsAreTyped) {
  EXPECT_EQ(metrics_error(metrics_line(1) + metrics_line(2)), "");
  EXPECT_EQ(metrics_error(metrics_line(1) + "{\"iter"), "");  // half-written last line
  EXPECT_NE(
      metrics_error(metrics_line(1, [](json& j) { j["loss"] = "low"; }))
          .find("metrics.jsonl line 1: field \"loss\" of the metrics record must be a number"),
      std::string::npos);
  EXPECT_NE(metrics_error("[1]\n").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(metrics_error("{\"iteration\": 1e400}\n{}\n").find("line 1 is not valid JSON"),
            std::string::npos);
  EXPECT_NE(metrics_error(std::string(1000, '[') + "\n{}\n").find("more than 64 levels"),
            std::string::npos);
  EXPECT_NE(metrics_error(metrics_line(1, [](json& j) { j["iteration"] = -1; }))
                .find("field \"iteration\" of the metrics record must be an integer in [0, "),
            std::string::npos);
}

TEST(RunTraceHostile, MetricsNullIsANonFiniteNumberNotAnError) {
  // A diverged loss is NaN, which JSON writes as null.
  const auto records =
      run_metrics_parse(metrics_line(1, [](json& j) { j["loss"] = nullptr; }), "metrics.jsonl");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_TRUE(std::isnan(records[0].loss));
}

TEST(RunTraceHostile, MetricsFieldMissingOrRenamedNamesItTheFileAndTheLine) {
  const std::string missing =
      metrics_error(metrics_line(1) + metrics_line(2, [](json& j) { j.erase("tokens_per_s"); }));
  EXPECT_NE(missing.find("metrics.jsonl line 2: the metrics record lacks the field "
                         "\"tokens_per_s\""),
            std::string::npos)
      << missing;
  // A renamed required field is missing under its name.
  const std::string renamed = metrics_error(metrics_line(1, [](json& j) {
    j["lm_loss"] = j["loss"];
    j.erase("loss");
  }));
  EXPECT_NE(renamed.find("metrics.jsonl line 1: the metrics record lacks the field \"loss\""),
            std::string::npos)
      << renamed;
  // A renamed optional field is not silently absent: its new name is unknown.
  const std::string unknown =
      metrics_error(metrics_line(1, [](json& j) { j["validation_loss"] = 3.0; }));
  EXPECT_NE(unknown.find("metrics.jsonl line 1: the metrics record has the field "
                         "\"validation_loss\", which this version of infinipipe does not know"),
            std::string::npos)
      << unknown;
}

TEST(RunTraceHostile, MetricsOptionalFieldsMayBeAbsent) {
  runlog::IterationMetrics m;
  m.iteration = 4;
  m.valid_loss = 3.5;
  m.valid_tokens = 100;
  m.rss_peak_bytes = 1 << 20;
  const auto back = run_metrics_parse(
      runlog::metrics_record_to_json(m).dump() + "\n" + metrics_line(5), "metrics.jsonl");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].valid_loss, 3.5);
  EXPECT_EQ(back[0].valid_tokens, 100);
  EXPECT_EQ(back[0].rss_peak_bytes, 1 << 20);
  EXPECT_FALSE(back[1].valid_loss.has_value());
  EXPECT_FALSE(back[1].test_loss.has_value());
  EXPECT_EQ(back[1].rss_peak_bytes, -1);
  // valid_tokens comes with valid_loss.
  EXPECT_NE(metrics_error(metrics_line(1, [](json& j) { j["valid_loss"] = 3.0; }))
                .find("lacks the field \"valid_tokens\""),
            std::string::npos);
}

json trace_with(json events) {
  runlog::TraceMetadata meta;
  meta.schedule = "epp";
  return {{"traceEvents", std::move(events)}, {"metadata", runlog::trace_metadata_to_json(meta)}};
}

json action_event(void (*change)(json& args) = nullptr) {
  runlog::TraceActionArgs a;
  a.iteration = 1;
  a.predicted_s = 0.5;
  json args = runlog::trace_action_args_to_json(a);
  if (change) change(args);
  return runlog::trace_slice_to_json({"forward 0", "forward", 10.0, 20.0, 0, 0, args});
}

std::string trace_error(const json& j) {
  return testing::error_text([&] {
    RunTrace out;
    run_trace_parse(j, "t.json", out);
  });
}

TEST(RunTraceHostile, TraceFieldsAreRangeChecked) {
  json j = trace_with(json::array());
  EXPECT_EQ(trace_error(j), "");
  j["metadata"]["pp"] = int64_t{1} << 40;  // once truncated to an int32 silently
  EXPECT_NE(trace_error(j).find("t.json: metadata: field \"pp\" of the trace metadata must be "
                                "an integer"),
            std::string::npos)
      << trace_error(j);
  j = trace_with(json::array());
  j["metadata"]["format"] = "other";
  EXPECT_NE(trace_error(j).find("not a trace of `infinipipe train --trace`"), std::string::npos);
  j = trace_with(json::array());
  j["metadata"]["version"] = 2;
  EXPECT_NE(trace_error(j).find("trace format version 2"), std::string::npos);
}

TEST(RunTraceHostile, TraceFieldMissingOrRenamedNamesItTheFileAndTheEvent) {
  EXPECT_EQ(trace_error(trace_with({action_event()})), "");
  const std::string missing =
      trace_error(trace_with({action_event(), action_event([](json& a) { a.erase("chunk"); })}));
  EXPECT_NE(missing.find("t.json: event 1: the args object of an action event lacks the field "
                         "\"chunk\""),
            std::string::npos)
      << missing;
  const std::string renamed = trace_error(trace_with({action_event([](json& a) {
    a["peak"] = 5;  // was peak_bytes
  })}));
  EXPECT_NE(
      renamed.find("t.json: event 0: the args object of an action event has the field \"peak\""),
      std::string::npos)
      << renamed;
  json e = action_event();
  e.erase("dur");
  EXPECT_NE(trace_error(trace_with({e}))
                .find("t.json: event 0: the trace event lacks the field "
                      "\"dur\""),
            std::string::npos);
  // The iteration's args are its metrics record.
  json it = runlog::trace_slice_to_json(
      {"iteration 1", "iteration", 0.0, 50.0, 0, 2, runlog::metrics_record_to_json({})});
  it["args"].erase("loss");
  EXPECT_NE(trace_error(trace_with({it}))
                .find("t.json: event 0: the metrics record lacks "
                      "the field \"loss\""),
            std::string::npos);
  // Older files: max_iterations instead of iterations, no cpu_s, no memory counters.
  json old = trace_with({action_event()});
  old["metadata"].erase("iterations");
  old["metadata"]["max_iterations"] = 50;
  EXPECT_EQ(trace_error(old), "");
}

}  // namespace
}  // namespace infinipipe::report
