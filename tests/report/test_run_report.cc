// The report of a traced run, on a run whose "measurement" is known: the simulated step of a
// 4-stage EPP plan stretched by 25 % in time, written in the trace format of `train --trace`.
// Every error is then +25 %, the measured bubbles equal the predicted ones, and memory peaks are
// off by the factor written. Bad run directories are errors naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/error_text.h"
#include "common/report_tables_check.h"
#include "common/text_count.h"
#include "core/error.h"
#include "plan/plan_json.h"
#include "plan/schedule.h"
#include "plan/test_plan_util.h"
#include "report/chart_svg.h"
#include "report/run_compare.h"
#include "report/run_html.h"
#include "report/run_html_training.h"
#include "report/run_trace.h"
#include "report/trace_merge.h"
#include "report_test_plan.h"
#include "runlog/metrics_record.h"
#include "runlog/trace_record.h"
#include "sim/simulator.h"

namespace infinipipe::report {
namespace {

using testing::text_count;

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr double kStretch = 1.25;

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

class RunReport : public ::testing::Test {
 protected:
  Config cfg = plan::testing::small_config(4);
  cost::CostModel cost = cost::CostModel::from_config(cfg);
  plan::Plan p = testing::report_test_plan(cfg, cost, 1);
  fs::path dir;

  void SetUp() override {
    dir = fs::path(::testing::TempDir()) /
          fmt::format("infinipipe_report_{}_{}", getpid(),
                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir / "plans");
  }
  void TearDown() override { fs::remove_all(dir); }

  // Iterations 1 .. `iterations` of a pp = 4 run, one trace file per rank, as `train --trace`
  // writes them (the records of runlog); iteration `it` stretched by stretch(it) (kStretch by
  // default).
  void fake_run(int64_t iterations = 2, double (*stretch)(int64_t) = nullptr) {
    const sim::StepResult r = sim::simulate(p, cost, cfg);
    for (int32_t rank = 0; rank < 4; ++rank) {
      json events = json::array();
      for (int64_t it = 1; it <= iterations; ++it) {
        const double s = stretch ? stretch(it) : kStretch;
        const double t0 = (it - 1) * 10.0 * r.step_time * 1e6;  // µs
        runlog::TraceSlice iteration{fmt::format("iteration {}", it), "iteration", t0,
                                     s * r.step_time * 1e6,           rank,        2};
        iteration.args = runlog::metrics_record_to_json(metrics_of(it, r.peak_bytes[rank]));
        events.push_back(runlog::trace_slice_to_json(iteration));
        for (const sim::ActionRecord& a : r.actions[static_cast<size_t>(rank)]) {
          const char* kind = plan::action_kind_name(a.action.kind);
          runlog::TraceActionArgs args;
          args.iteration = it;
          args.chunk = a.action.chunk;
          args.stage = a.action.stage;
          args.kind = a.action.kind;
          args.recompute_layers = a.action.recompute_layers;
          args.predicted_s = a.action.predicted_time;
          args.memory_bytes = 1000 + a.action.chunk;
          runlog::TraceSlice action{kind,
                                    kind,
                                    t0 + s * a.start * 1e6,
                                    s * (a.end - a.start) * 1e6,
                                    rank,
                                    0,
                                    runlog::trace_action_args_to_json(args)};
          events.push_back(runlog::trace_slice_to_json(action));
        }
      }
      runlog::TraceMetadata meta;
      meta.world_rank = rank;
      meta.pp = 4;
      meta.stage = rank;
      meta.one_process = false;
      meta.schedule = "epp";
      write(dir / fmt::format("trace-rank{:05d}.json", rank),
            runlog::trace_file_opening(meta) + events.dump().substr(1) + "}");
    }
    for (int64_t it = 1; it <= iterations; ++it)
      plan::plan_save(p, (dir / "plans" / fmt::format("iter-{:08d}-replica0.json", it)).string());
  }

  // Iteration `it`'s metrics: loss 5 - it, 1000 * it tokens/s, 2 % above the predicted peak.
  static runlog::IterationMetrics metrics_of(int64_t it, int64_t predicted_peak) {
    runlog::IterationMetrics m;
    m.iteration = it;
    m.loss = 5.0 - static_cast<double>(it);
    m.tokens_per_s = 1000.0 * static_cast<double>(it);
    m.measured_peak_bytes = static_cast<int64_t>(1.02 * static_cast<double>(predicted_peak));
    return m;
  }
};

TEST_F(RunReport, StretchedRunHasItsErrorEverywhereAndTheSameBubbles) {
  fake_run();
  const RunTrace t = run_trace_load(dir.string());
  EXPECT_EQ(t.files.size(), 4u);
  EXPECT_EQ(t.metrics.size(), 2u);  // from rank 0's iterations (no metrics.jsonl)
  const RunCompare c = run_compare(t, cost, cfg);
  ASSERT_EQ(c.iterations.size(), 2u);
  ASSERT_EQ(c.stages.size(), 4u);
  ASSERT_GE(c.by_kind.size(), 3u);  // forward, backward, recompute (chunk 1), all
  EXPECT_EQ(c.by_kind[2].label, "recompute");
  for (const ErrorStats& e : c.by_kind) {
    EXPECT_GT(e.count, 0) << e.label;
    EXPECT_NEAR(e.median_abs_rel, kStretch - 1, 1e-6) << e.label;
    EXPECT_NEAR(e.mean_rel, kStretch - 1, 1e-6) << e.label;
  }
  EXPECT_NEAR(c.step.mean_abs_rel, kStretch - 1, 1e-6);
  EXPECT_NEAR(c.bubble_measured, c.bubble_predicted, 1e-6);
  EXPECT_NEAR(c.idle_measured, c.idle_predicted, 1e-6);
  EXPECT_GT(c.bubble_predicted, 0.0);  // a 4-stage pipeline idles somewhere
  for (const StageCompare& s : c.stages) {
    EXPECT_NEAR(s.time.mean_abs_rel, kStretch - 1, 1e-6);
    EXPECT_GT(s.peak_predicted, 0);
    EXPECT_NEAR(static_cast<double>(s.peak_measured) / static_cast<double>(s.peak_predicted), 1.02,
                1e-3);
  }
  EXPECT_TRUE(c.iterations[1].has_metrics);
  EXPECT_DOUBLE_EQ(c.iterations[1].loss, 3.0);

  const std::string tables = run_compare_tables(c);
  EXPECT_NE(tables.find("| recompute |"), std::string::npos) << tables;
  EXPECT_NE(tables.find("+25.0%"), std::string::npos) << tables;
  const json j = run_compare_to_json(c);
  EXPECT_EQ(j.at("stages").size(), 4u);
  EXPECT_NEAR(j.at("step").at("median_abs_rel_error").get<double>(), 0.25, 1e-6);
}

TEST_F(RunReport, JsonHoldsTheNumbersOfTheTables) {
  fake_run();
  const RunCompare c = run_compare(run_trace_load(dir.string()), cost, cfg);
  const std::string tables = run_compare_tables(c);
  // Through text, as `report --json` writes it.
  json j = json::parse(run_compare_to_json(c).dump(1));
  EXPECT_EQ(j.at("format"), "infinipipe-report");
  EXPECT_EQ(j.at("version"), 1);
  EXPECT_EQ(j.at("traced_iterations"), 2);
  const std::vector<std::string> problems = test_report::report_tables_mismatches(tables, j);
  EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n")) << "\n" << tables;
  for (const json& i : j.at("iterations"))
    EXPECT_NEAR(i.at("step_rel_error").get<double>(), kStretch - 1, 1e-6);
  for (const json& s : j.at("stages"))
    EXPECT_NEAR(s.at("peak_rel_error").get<double>(), 0.02, 1e-3);
  // The check sees a number that differs from the printed one.
  j["stages"][1]["bubble_measured"] = j["stages"][1]["bubble_measured"].get<double>() + 0.01;
  j["by_kind"][0]["predicted_s"] = j["by_kind"][0]["predicted_s"].get<double>() * 1.01;
  j["step"]["mean_rel_error"] = j["step"]["mean_rel_error"].get<double>() + 0.01;
  EXPECT_EQ(test_report::report_tables_mismatches(tables, j).size(), 3u);
}

// A fit that learns: iteration it is off by 40 % / it. The error after the warm-up and per window
// of ten iterations falls, and the tables print the JSON's numbers.
TEST_F(RunReport, IterationErrorFallsOverTheRunInWindows) {
  fake_run(25, [](int64_t it) { return 1.0 + 0.4 / static_cast<double>(it); });
  const RunCompare c = run_compare(run_trace_load(dir.string()), cost, cfg);
  EXPECT_EQ(c.step.count, 25);
  EXPECT_EQ(c.step_after_warmup.label, "iterations 11-25");
  EXPECT_EQ(c.step_after_warmup.count, 15);
  EXPECT_NEAR(c.step_after_warmup.median_abs_rel, 0.4 / 18, 1e-6);  // iteration 18 is the median
  ASSERT_EQ(c.step_windows.size(), 3u);
  EXPECT_EQ(c.step_windows[0].label, "iterations 1-10");
  EXPECT_EQ(c.step_windows[2].label, "iterations 21-25");
  EXPECT_EQ(c.step_windows[2].count, 5);
  EXPECT_NEAR(c.step_windows[2].median_abs_rel, 0.4 / 23, 1e-6);
  EXPECT_GT(c.step_windows[0].median_abs_rel, c.step_windows[1].median_abs_rel);
  EXPECT_GT(c.step_windows[1].median_abs_rel, c.step_windows[2].median_abs_rel);
  // Every action stretched alike: a kind's share of a window is its predicted time times the
  // window's summed stretch over its predicted steps, and the largest comes first.
  std::map<std::string, double> kind_s;
  for (const auto& list : p.actions) {
    for (const plan::Action& a : list) {
      std::string kind = "forward";
      if (a.kind == plan::ActionKind::backward)
        kind = a.recompute_layers > 0 ? "recompute" : "backward";
      kind_s[kind] += a.predicted_time;
    }
  }
  const double step = sim::simulate(p, cost, cfg).step_time;
  double stretch = 0;
  for (int64_t it = 21; it <= 25; ++it) stretch += 0.4 / static_cast<double>(it);
  ASSERT_EQ(c.step_window_kinds.size(), 3u);
  const std::vector<KindShare>& last = c.step_window_kinds[2];
  ASSERT_EQ(last.size(), kind_s.size());
  for (size_t i = 0; i < last.size(); ++i) {
    EXPECT_NEAR(last[i].share, kind_s.at(last[i].kind) * stretch / (5 * step), 1e-9)
        << last[i].kind;
    if (i > 0) {
      EXPECT_GE(last[i - 1].share, last[i].share);
    }
  }
  const std::string tables = run_compare_tables(c);
  EXPECT_NE(tables.find("## Iteration error over the run"), std::string::npos) << tables;
  EXPECT_NE(tables.find(fmt::format("| {} +", last[0].kind)), std::string::npos) << tables;
  const json j = json::parse(run_compare_to_json(c).dump(1));
  EXPECT_EQ(j.at("step_windows").size(), 3u);
  const std::vector<std::string> problems = test_report::report_tables_mismatches(tables, j);
  EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n")) << "\n" << tables;
}

TEST_F(RunReport, HtmlIsSelfContainedWithEveryChartMarked) {
  fake_run();
  const RunTrace t = run_trace_load(dir.string());
  const RunCompare c = run_compare(t, cost, cfg);
  const std::string html = run_html(c, t);
  EXPECT_EQ(run_html_chart_count(c), 12);
  EXPECT_EQ(text_count(html, "<svg class=\"chart\""), 12);
  for (const char* name : {"gantt-planned", "gantt-measured", "memory-rank0", "memory-rank3",
                           "loss", "tokens-per-s", "lr", "grad-norm", "rss", "prediction-error"}) {
    EXPECT_NE(html.find(fmt::format("data-chart=\"{}\"", name)), std::string::npos) << name;
  }
  EXPECT_NE(html.find("id=\"render-check\""), std::string::npos);
  // Both traced iterations' Gantt charts, the last shown, a selector for the other.
  EXPECT_EQ(text_count(html, "<div class=\"gantt-iteration\""), 2);
  EXPECT_EQ(text_count(html, "style=\"display:none\""), 1);
  EXPECT_EQ(text_count(html, "<option value="), 2);
  EXPECT_NE(html.find("<option value=\"2\" selected>"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);  // nothing from the network
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(text_count(html, "http"), text_count(html, "http://www.w3.org/2000/svg"));
  EXPECT_NE(html.find("<table>"), std::string::npos);
  // Both Gantt charts draw every action of their step.
  const int actions = 2 * static_cast<int>(p.chunks.size()) * 4;
  EXPECT_GE(text_count(html, "<title>forward chunk") + text_count(html, "<title>backward chunk"),
            2 * actions);
}

// The per-iteration table of a long run starts collapsed (one click opens it); a short one is open.
TEST_F(RunReport, LongTablesStartCollapsed) {
  fake_run(2);
  RunTrace t = run_trace_load(dir.string());
  std::string html = run_html(run_compare(t, cost, cfg), t);
  EXPECT_EQ(html.find("<details><summary>"), std::string::npos);
  fake_run(25);
  t = run_trace_load(dir.string());
  html = run_html(run_compare(t, cost, cfg), t);
  EXPECT_NE(html.find("<details><summary>25 rows</summary>\n<table>"), std::string::npos);
}

TEST_F(RunReport, TrainingChartsDrawValidationLossOnlyWhereAnEvaluationRan) {
  const auto mark = [](const std::string& svg, const std::string&) { return svg; };
  std::vector<runlog::IterationMetrics> metrics(2);
  for (int64_t i = 0; i < 2; ++i) {
    metrics[i].iteration = i + 1;
    metrics[i].loss = 4.0 - 0.5 * static_cast<double>(i);
    metrics[i].lr = 1e-4 * static_cast<double>(i + 1);
    metrics[i].grad_norm = 2.0 - 0.5 * static_cast<double>(i);
  }
  std::string h = html_training(metrics, mark);
  EXPECT_EQ(h.find("validation loss"), std::string::npos);
  EXPECT_NE(h.find("learning rate per iteration"), std::string::npos);
  EXPECT_NE(h.find("gradient norm per iteration"), std::string::npos);
  EXPECT_EQ(text_count(h, "<svg"), kTrainingCharts - 1);  // html_rss draws the last
  metrics[1].valid_loss = 3.75;
  h = html_training(metrics, mark);
  EXPECT_NE(h.find("validation loss"), std::string::npos);
  EXPECT_EQ(html_config(""), "");
  EXPECT_NE(html_config("a: <b>\n").find("a: &lt;b&gt;"), std::string::npos);
}

TEST_F(RunReport, MergedTraceHoldsEveryRanksEvents) {
  fake_run();
  const RunTrace t = run_trace_load(dir.string());
  const json merged = trace_merge(t);
  size_t events = 0;
  for (const TraceFileInfo& f : t.files) {
    std::ifstream in(f.path);
    events += json::parse(in).at("traceEvents").size();
  }
  EXPECT_EQ(merged.at("traceEvents").size(), events);
  EXPECT_EQ(merged.at("metadata").at("ranks").size(), t.files.size());
  EXPECT_EQ(merged.at("metadata").at("format"), "infinipipe-merged-trace");
  EXPECT_THROW(trace_merge_save(t, (dir / "no-such-dir" / "m.json").string()), Error);
}

TEST_F(RunReport, MetricsFileGivesTheCurvesAndToleratesACutLastLine) {
  fake_run();
  const std::string one = runlog::metrics_record_to_json(metrics_of(1, 100)).dump();
  const std::string two = runlog::metrics_record_to_json(metrics_of(2, 100)).dump();
  write(dir / "metrics.jsonl", one + "\n" + two + "\n" + two.substr(0, 20));
  const RunTrace t = run_trace_load(dir.string());
  ASSERT_EQ(t.metrics.size(), 2u);
  EXPECT_EQ(t.metrics[1].loss, 3.0);
  write(dir / "metrics.jsonl", one + "\nnot json\n" + two + "\n");
  EXPECT_THROW(run_trace_load(dir.string()), Error);
}

TEST_F(RunReport, RenamedOrMissingFieldFailsTheReportNamingTheFieldFileAndLine) {
  fake_run();
  json renamed = runlog::metrics_record_to_json(metrics_of(2, 100));
  renamed["lm_loss"] = renamed["loss"];
  renamed.erase("loss");
  write(dir / "metrics.jsonl",
        runlog::metrics_record_to_json(metrics_of(1, 100)).dump() + "\n" + renamed.dump() + "\n");
  std::string e = testing::error_text([&] { run_trace_load(dir.string()); });
  EXPECT_NE(e.find((dir / "metrics.jsonl").string() +
                   " line 2: the metrics record lacks the field \"loss\""),
            std::string::npos)
      << e;
  // In a trace: an action's predicted time under another name.
  fs::remove(dir / "metrics.jsonl");
  const fs::path t2 = dir / "trace-rank00002.json";
  std::string text;
  {
    std::ifstream in(t2);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = text.find("\"predicted_s\"");
  ASSERT_NE(at, std::string::npos);
  write(t2, text.substr(0, at) + "\"predicted_seconds\"" + text.substr(at + 13));
  e = testing::error_text([&] { run_trace_load(dir.string()); });
  EXPECT_NE(e.find(t2.string() + ": event "), std::string::npos) << e;
  EXPECT_NE(e.find("lacks the field \"predicted_s\""), std::string::npos) << e;
}

std::string error_of(const std::string& dir) {
  return testing::error_text([&] { run_trace_load(dir); });
}

TEST_F(RunReport, BadRunDirectoriesAreErrorsNamingTheFile) {
  EXPECT_NE(error_of((dir / "missing").string()).find("does not exist"), std::string::npos);
  EXPECT_NE(error_of(dir.string()).find("no trace-rank"), std::string::npos);
  fake_run();
  // A trace cut in the middle (a run killed while writing).
  const fs::path t1 = dir / "trace-rank00001.json";
  std::string text;
  {
    std::ifstream in(t1);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  write(t1, text.substr(0, text.size() / 2));
  std::string e = error_of(dir.string());
  EXPECT_NE(e.find("trace-rank00001.json"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  write(t1, "{\"traceEvents\": []}");
  e = error_of(dir.string());
  EXPECT_NE(e.find("trace-rank00001.json"), std::string::npos) << e;
  write(t1, text);
  fs::remove(dir / "trace-rank00003.json");
  EXPECT_NE(error_of(dir.string()).find("missing"), std::string::npos);
  write(dir / "trace-rank00003.json", text);  // rank 1's file as rank 3's: stage 1 twice
  fs::remove(dir / "plans" / "iter-00000002-replica0.json");
  e = error_of(dir.string());
  EXPECT_NE(e.find("iter-00000002-replica0.json"), std::string::npos) << e;
}

TEST(ErrorStats, MedianMeanAndBias) {
  const ErrorStats e = error_stats("x", {1, 1, 2, 0}, {1.1, 0.8, 2.6, 5});
  EXPECT_EQ(e.count, 3);  // the unpredicted one is left out
  EXPECT_NEAR(e.median_abs_rel, 0.2, 1e-12);
  EXPECT_NEAR(e.mean_abs_rel, (0.1 + 0.2 + 0.3) / 3, 1e-12);
  EXPECT_NEAR(e.mean_rel, (0.1 - 0.2 + 0.3) / 3, 1e-12);
  EXPECT_DOUBLE_EQ(e.predicted_s, 4.0);
}

TEST(LineChart, DrawsEachSeriesAndSaysWhenEmpty) {
  LineChartOptions o;
  o.title = "t";
  const std::string svg = line_chart_svg({{"a", "#f00", {{0, 1}, {1, 2}, {2, 1.5}}, false, false},
                                          {"b", "#00f", {{0, 3}}, true, true}},
                                         o);
  EXPECT_EQ(text_count(svg, "<polyline"), 2);
  EXPECT_EQ(text_count(svg, "<circle"), 1);  // b's lone point
  EXPECT_EQ(svg.find("no data"), std::string::npos);
  EXPECT_NE(line_chart_svg({{"a", "#f00", {}, false, false}}, o).find("no data"),
            std::string::npos);
}

// However many series, each legend entry lies inside the picture, below the title and above the
// plot, and no two entries share space (the process-memory chart has one per category).
TEST(LineChart, LegendWrapsInsideThePictureBelowTheTitle) {
  LineChartOptions o;
  o.title = "process memory, rank 0 (measured)";
  o.width = 420;
  std::vector<LineSeries> series;
  for (const char* label : {"parameters", "gradients", "optimizer state", "activations",
                            "K/V context", "communication buffers", "workspace", "other"})
    series.push_back({label, "#123456", {{0, 1}, {1, 2}}, false, false});
  const std::string svg = line_chart_svg(series, o);
  const std::regex entry(R"re(<g class="legend"><line x1="([0-9.]+)" y1="([0-9.]+)".*?<text )re"
                         R"re(x="([0-9.]+)" y="([0-9.]+)">([^<]*)</text></g>)re");
  const std::regex plot(R"re(<rect x="78" y="([0-9.]+)" width="[0-9.]+" height="[0-9.]+" )re"
                        R"re(fill="#fafafa")re");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, plot)) << svg;
  const double plot_top = std::stod(m[1]);
  std::vector<std::array<double, 3>> boxes;  // x from, x to, row y
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), entry); it != std::sregex_iterator();
       ++it) {
    const double x0 = std::stod((*it)[1]), y = std::stod((*it)[2]);
    const double x1 = std::stod((*it)[3]) + 6.8 * static_cast<double>((*it)[5].length());
    EXPECT_GE(x0, 0);
    EXPECT_LE(x1, o.width) << (*it)[5];
    EXPECT_GT(y, 18 + 4) << (*it)[5];  // below the title's baseline
    EXPECT_LT(y + 4, plot_top) << (*it)[5];
    for (const auto& b : boxes)
      EXPECT_TRUE(b[2] != y || x0 >= b[1] || x1 <= b[0]) << (*it)[5] << " overlaps";
    boxes.push_back({x0, x1, y});
  }
  EXPECT_EQ(boxes.size(), series.size());
  EXPECT_GT(boxes.back()[2], boxes.front()[2]) << "the legend did not wrap";
}

}  // namespace
}  // namespace infinipipe::report
