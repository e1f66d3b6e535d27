// The schemas of what a run writes and the report reads: every record kind reads back what it
// wrote, field for field, optional fields present or absent; a record with a missing, renamed or
// mistyped field is an Error naming it, never a default.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/error_text.h"
#include "runlog/metrics_record.h"
#include "runlog/timings_record.h"
#include "runlog/trace_record.h"

namespace infinipipe::runlog {
namespace {

using json = nlohmann::json;
using testing::error_text;

IterationMetrics full_metrics() {
  IterationMetrics m;
  m.iteration = 7;
  m.train_iters = 10;
  m.consumed_samples = 112;
  m.loss = 3.25;
  m.sequences = 16;
  m.tokens = 4096;
  m.predicted_tokens = 4080;
  m.seconds = 1.5;
  m.plan_seconds = 0.01;
  m.plan_wait_seconds = 0.002;
  m.tokens_per_s = 2730.5;
  m.lr = 3e-4;
  m.grad_norm = 0.75;
  m.schedule = "epp";
  m.plan_knobs = "K=2, adaptive recompute";
  m.chunks = 5;
  m.recompute_layers = 3;
  m.predicted_step_seconds = 1.2;
  m.measured_step_seconds = 1.4;
  m.predicted_peak_bytes = 1 << 20;
  m.measured_peak_bytes = 1 << 21;
  m.measured_activation_peak_bytes = 1 << 19;
  m.memory_budget = int64_t{1} << 30;
  m.rss_peak_bytes = int64_t{1} << 28;
  m.valid_loss = 3.5;
  m.valid_tokens = 900;
  m.test_loss = 3.75;
  m.test_tokens = 800;
  m.eval_seconds = 0.25;
  return m;
}

TEST(Records, MetricsRoundTripWithAndWithoutOptionalFields) {
  const IterationMetrics m = full_metrics();
  const json j = metrics_record_to_json(m);
  EXPECT_EQ(j.size(), 29u);
  const IterationMetrics back = metrics_record_from_json(j, "m.jsonl line 1", "");
  EXPECT_EQ(metrics_record_to_json(back), j);
  EXPECT_EQ(back.valid_loss, 3.5);
  EXPECT_EQ(back.rss_peak_bytes, int64_t{1} << 28);
  // Without evaluation and RSS, those fields are not written and read back unset.
  const json plain = metrics_record_to_json(IterationMetrics{});
  EXPECT_EQ(plain.size(), 23u);
  EXPECT_FALSE(plain.contains("valid_tokens"));
  EXPECT_FALSE(plain.contains("eval_seconds"));
  EXPECT_FALSE(plain.contains("rss_peak_bytes"));
  const IterationMetrics p = metrics_record_from_json(plain, "m.jsonl line 2", "");
  EXPECT_FALSE(p.valid_loss || p.test_loss);
  EXPECT_EQ(p.rss_peak_bytes, -1);
}

TEST(Records, MetricsNonFiniteNumbersAreNull) {
  IterationMetrics m;
  m.loss = std::numeric_limits<double>::quiet_NaN();
  m.grad_norm = std::numeric_limits<double>::infinity();
  const json j = json::parse(metrics_record_to_json(m).dump());
  EXPECT_TRUE(j.at("loss").is_null());
  const IterationMetrics back = metrics_record_from_json(j, "m.jsonl line 1", "");
  EXPECT_TRUE(std::isnan(back.loss));
  EXPECT_TRUE(std::isnan(back.grad_norm));  // the writer cannot tell them apart
}

TEST(Records, EveryRequiredMetricsFieldIsRequired) {
  const json j = metrics_record_to_json(IterationMetrics{});
  for (const auto& [key, value] : j.items()) {
    json without = j;
    without.erase(key);
    const std::string e =
        error_text([&] { metrics_record_from_json(without, "m.jsonl line 3", "re-run"); });
    EXPECT_NE(e.find("m.jsonl line 3: the metrics record lacks the field \"" + key + "\""),
              std::string::npos)
        << key << ": " << e;
    EXPECT_NE(e.find("; re-run"), std::string::npos) << e;
  }
}

TEST(Records, MetricsFieldOfTheWrongTypeNamesIt) {
  json j = metrics_record_to_json(IterationMetrics{});
  j["chunks"] = 2.5;
  EXPECT_NE(error_text([&] {
              metrics_record_from_json(j, "m.jsonl line 1", "");
            }).find("m.jsonl line 1: field \"chunks\" of the metrics record must be an integer"),
            std::string::npos);
  j = metrics_record_to_json(IterationMetrics{});
  j["chunks"] = int64_t{1} << 40;  // beyond int32: refused, not truncated
  EXPECT_NE(error_text([&] {
              metrics_record_from_json(j, "m.jsonl line 1", "");
            }).find("field \"chunks\""),
            std::string::npos);
  j = metrics_record_to_json(IterationMetrics{});
  j["schedule"] = 1;
  EXPECT_NE(error_text([&] {
              metrics_record_from_json(j, "m.jsonl line 1", "");
            }).find("field \"schedule\" of the metrics record must be a string"),
            std::string::npos);
}

TEST(Records, TimingsRoundTripAndNameTheAction) {
  ActionTimingsRecord r;
  r.iteration = 3;
  r.predicted_step_seconds = 0.5;
  r.actions.push_back({0, 0, plan::ActionKind::forward, 1, 2, 0.1, 0.0, 0.12});
  r.actions.push_back({1, 1, plan::ActionKind::backward, 1, 0, 0.2, 0.2, 0.41});
  const json j = timings_record_to_json(r);
  EXPECT_EQ(j.at("actions").at(1).at("kind"), "backward");
  const ActionTimingsRecord back = timings_record_from_json(j, "t.jsonl line 1", "");
  EXPECT_EQ(timings_record_to_json(back), j);
  ASSERT_EQ(back.actions.size(), 2u);
  EXPECT_EQ(back.actions[1].kind, plan::ActionKind::backward);
  json bad = j;
  bad["actions"][1].erase("end_s");
  EXPECT_NE(error_text([&] {
              timings_record_from_json(bad, "t.jsonl line 1", "");
            }).find("t.jsonl line 1: actions[1]: the timed action lacks the field \"end_s\""),
            std::string::npos);
  bad = j;
  bad["actions"][0]["kind"] = "sideways";
  EXPECT_NE(error_text([&] {
              timings_record_from_json(bad, "t.jsonl line 1", "");
            }).find("must be \"forward\" or \"backward\""),
            std::string::npos);
}

TEST(Records, TraceRecordsRoundTrip) {
  TraceMetadata m;
  m.world_rank = 3;
  m.pp = 2;
  m.dp = 2;
  m.stage = 1;
  m.replica = 1;
  m.one_process = false;
  m.schedule = "1f1b";
  m.iterations = std::array<int64_t, 2>{5, 9};
  m.clock = "steady";
  m.memory = "this rank's tracker";
  const json mj = trace_metadata_to_json(m);
  EXPECT_EQ(mj.at("format"), kTraceFormat);
  EXPECT_EQ(trace_metadata_to_json(trace_metadata_from_json(mj, "t.json: metadata", "")), mj);

  TraceActionArgs a;
  a.iteration = 5;
  a.chunk = 2;
  a.stage = 3;
  a.kind = plan::ActionKind::backward;
  a.predicted_s = 0.25;
  a.peak_bytes = 4096;
  const json aj = trace_action_args_to_json(a);
  EXPECT_FALSE(aj.contains("cpu_s"));
  EXPECT_FALSE(aj.contains("memory_bytes"));
  const TraceActionArgs ab = trace_action_args_from_json(aj, "t.json: event 4", "");
  EXPECT_EQ(trace_action_args_to_json(ab), aj);
  EXPECT_EQ(ab.peak_bytes, 4096);
  EXPECT_FALSE(ab.memory_bytes.has_value());

  const TraceSlice s{"backward 2", "backward", 12.5, 3.25, 1, 0, aj};
  const json sj = trace_slice_to_json(s);
  EXPECT_EQ(sj.at("ph"), "X");
  const std::optional<TraceSlice> sb = trace_slice_from_json(sj, "t.json: event 4", "");
  ASSERT_TRUE(sb.has_value());
  EXPECT_EQ(trace_slice_to_json(*sb), sj);
  // Other phases are not slices.
  EXPECT_FALSE(trace_slice_from_json({{"ph", "C"}, {"name", "memory"}}, "t.json: event 5", ""));
  EXPECT_EQ(
      trace_host_args_from_json(trace_host_args_to_json({8}), "t.json: event 6", "").iteration, 8);
}

TEST(Records, TraceFileOpeningParsesBackToItsMetadata) {
  TraceMetadata m;
  m.schedule = "epp";
  const std::string text = trace_file_opening(m) + "\n]}\n";
  const json j = json::parse(text);
  const TraceFileParts parts = trace_file_from_json(j, "t.json", "");
  EXPECT_EQ(parts.metadata.schedule, "epp");
  ASSERT_NE(parts.events, nullptr);
  EXPECT_TRUE(parts.events->empty());
  EXPECT_NE(error_text([&] {
              trace_file_from_json(json::object(), "t.json", "");
            }).find("t.json has no \"traceEvents\" array"),
            std::string::npos);
}

}  // namespace
}  // namespace infinipipe::runlog
