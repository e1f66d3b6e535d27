// `infinipipe train --trace DIR` then `infinipipe report DIR` as a user runs them: a real tiny run
// (one process, and two ranks under mpirun), finite prediction errors for every stage, the HTML
// page rendered by headless Chromium with every chart drawn, and clear errors for bad directories.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/corpus_cli_test.h"
#include "common/build_paths.h"
#include "common/report_tables_check.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class ReportCli : public CorpusCliTest {
 protected:
  std::string train_args(int iters) const {
    return corpus_train_args(iters) + " --trace " + (dir_ / "run").string();
  }
  // The report's JSON, after checking what every run's report must hold.
  json report_check(int pp) {
    const ShellResult r = run_cli(fmt::format("report {} --json {}", (dir_ / "run").string(),
                                              (dir_ / "report.json").string()));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("## Time per action kind"), std::string::npos) << r.output;
    EXPECT_TRUE(fs::exists(dir_ / "run" / "report.html"));
    const json j = json_read(dir_ / "report.json");
    // The file holds the numbers the tables printed.
    const std::vector<std::string> problems =
        infinipipe::test_report::report_tables_mismatches(r.output, j);
    EXPECT_TRUE(problems.empty()) << fmt::format("{}", fmt::join(problems, "\n")) << "\n"
                                  << r.output;
    EXPECT_EQ(j.at("pp"), pp);
    EXPECT_EQ(j.at("stages").size(), static_cast<size_t>(pp));
    EXPECT_FALSE(j.at("iterations").empty());
    for (const json& k : j.at("by_kind")) {
      EXPECT_GT(k.at("count").get<int>(), 0);
      EXPECT_TRUE(std::isfinite(k.at("median_abs_rel_error").get<double>())) << k.dump();
      EXPECT_TRUE(std::isfinite(k.at("mean_abs_rel_error").get<double>())) << k.dump();
    }
    for (const json& s : j.at("stages")) {
      EXPECT_GT(s.at("time").at("count").get<int>(), 0);
      EXPECT_TRUE(std::isfinite(s.at("time").at("mean_abs_rel_error").get<double>()));
      EXPECT_GT(s.at("peak_predicted_bytes").get<int64_t>(), 0);
    }
    const double step = j.at("step").at("median_abs_rel_error");
    EXPECT_TRUE(std::isfinite(step));
    return j;
  }
};

TEST_F(ReportCli, OneProcessRunReportsFiniteErrorsAndRendersInChromium) {
  const ShellResult t = run_cli("train " + train_args(3));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_TRUE(fs::exists(dir_ / "run" / "metrics.jsonl"));  // metrics go next to the traces
  report_check(1);

  if (!have("chromium")) {
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it): the HTML "
                    "render check did not run";
  }
  const fs::path html = dir_ / "run" / "report.html";
  const std::string flags =
      "--headless --no-sandbox --disable-gpu --disable-background-networking "
      "--disable-dev-shm-usage --user-data-dir=" +
      (dir_ / "chromium-profile").string();
  const ShellResult dom = infinipipe::testing::shell_run(fmt::format(
      "timeout 60 chromium {} --dump-dom file://{}", flags, fs::absolute(html).string()));
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  // 1 rank: two Gantt charts, one memory chart, loss, tokens/s, lr, gradient norm, RSS,
  // prediction error.
  EXPECT_NE(dom.output.find("charts rendered: 9 of 9"), std::string::npos) << dom.output;
  EXPECT_NE(dom.output.find("data-charts=\"9\""), std::string::npos);
  for (const char* name : {"gantt-planned", "gantt-measured", "memory-rank0", "loss",
                           "tokens-per-s", "lr", "grad-norm", "rss", "prediction-error"}) {
    EXPECT_NE(dom.output.find(name), std::string::npos) << name;
  }
  // The device's default budget is far above this tiny model's curves: no line flattens them.
  EXPECT_EQ(dom.output.find(">budget</text>"), std::string::npos);
  EXPECT_NE(dom.output.find("within the budget of"), std::string::npos);
  // A screenshot that is not blank: a PNG of a white page compresses far smaller than charts.
  const fs::path png = dir_ / "page.png";
  const ShellResult shot = infinipipe::testing::shell_run(
      fmt::format("timeout 60 chromium {} --window-size=1400,1200 --screenshot={} file://{}", flags,
                  png.string(), fs::absolute(html).string()));
  if (shot.exit_code == 0 && fs::exists(png)) {
    EXPECT_GT(fs::file_size(png), 20000u);
  }
}

TEST_F(ReportCli, TwoRankPipelineReportsEveryStageWithItsMeasuredPeak) {
  if (!have("mpirun")) GTEST_SKIP() << "mpirun is not installed";
  const ShellResult t = infinipipe::testing::shell_run(fmt::format(
      "mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 env OMP_NUM_THREADS=1 {} "
      "train {} --pp 2",
      INFINIPIPE_BINARY, train_args(2)));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_TRUE(fs::exists(dir_ / "run" / "trace-rank00000.json"));
  EXPECT_TRUE(fs::exists(dir_ / "run" / "trace-rank00001.json"));
  const json j = report_check(2);
  EXPECT_FALSE(j.at("one_process"));
  for (const json& s : j.at("stages")) EXPECT_GT(s.at("peak_measured_bytes").get<int64_t>(), 0);
}

TEST_F(ReportCli, BadRunDirectoryExitsOneNamingIt) {
  ShellResult r = run_cli("report " + (dir_ / "nope").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
  fs::create_directories(dir_ / "empty");
  r = run_cli("report " + (dir_ / "empty").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--trace"), std::string::npos) << r.output;
  std::ofstream(dir_ / "empty" / "trace-rank00000.json") << "{\"traceEvents\": [";
  r = run_cli("report " + (dir_ / "empty").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("trace-rank00000.json is not valid JSON"), std::string::npos) << r.output;
}

}  // namespace
