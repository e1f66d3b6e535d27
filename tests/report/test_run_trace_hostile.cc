// Hostile trace and metrics files: clear Errors, never a library exception.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "report/run_trace.h"

namespace infinipipe::report {
namespace {

std::string metrics_error(const std::string& text) {
  try {
    run_metrics_parse(text, "metrics.jsonl");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RunTraceHostile, MetricsRecordsAreTyped) {
  EXPECT_EQ(metrics_error("{\"iteration\": 1, \"loss\": 2.5}\n{\"iteration\": 2}\n"), "");
  EXPECT_EQ(metrics_error("{\"iteration\": 1}\n{\"iter"), "");  // half-written last line
  EXPECT_NE(metrics_error("{\"iteration\": 1, \"loss\": \"low\"}\n")
                .find("metrics.jsonl line 1: loss must be a number"),
            std::string::npos);
  EXPECT_NE(metrics_error("[1]\n").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(metrics_error("{\"iteration\": 1e400}\n{}\n").find("line 1 is not valid JSON"),
            std::string::npos);
  EXPECT_NE(metrics_error(std::string(1000, '[') + "\n{}\n").find("more than 64 levels"),
            std::string::npos);
}

TEST(RunTraceHostile, TraceFieldsAreRangeChecked) {
  nlohmann::json j = {{"traceEvents", nlohmann::json::array()},
                      {"metadata",
                       {{"format", "infinipipe-trace"},
                        {"world_rank", 0},
                        {"pp", 1},
                        {"dp", 1},
                        {"stage", 0},
                        {"replica", 0},
                        {"one_process", true},
                        {"schedule", "epp"}}}};
  RunTrace out;
  EXPECT_NO_THROW(run_trace_parse(j, "t.json", out));
  j["metadata"]["pp"] = int64_t{1} << 40;  // once truncated to an int32 silently
  try {
    run_trace_parse(j, "t.json", out);
    ADD_FAILURE() << "pp 2^40 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"pp\" of the metadata must be an integer"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace infinipipe::report
