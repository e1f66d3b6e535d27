// `train --trace DIR --trace-explain` then `infinipipe report DIR`: every traced plan file
// carries the planner's explanation of that plan, and the report page shows it (the settings
// evaluated with their verdicts, the chosen one marked); without the flag the plans carry none
// and the page says how to get them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/corpus_cli_test.h"
#include "common/build_paths.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// HTML-escaped as the page writes text (svg_escape: &, <, >, ").
std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

class ReportExplainCli : public CorpusCliTest {
 protected:
  fs::path run() const { return dir_ / "run"; }
  std::string train(int iters, const std::string& extra) const {
    return fmt::format("train {} --trace {} {}", corpus_train_args(iters), run().string(), extra);
  }
};

TEST_F(ReportExplainCli, TracedPlansCarryTheirExplanationAndThePageShowsIt) {
  const ShellResult t = run_cli(train(2, "--trace-explain"));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const ShellResult r = run_cli("report " + run().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string html = text_of(run() / "report.html");
  EXPECT_NE(html.find("<h2>Why these plans</h2>"), std::string::npos);
  EXPECT_EQ(html.find("carry no explanation"), std::string::npos);

  for (int it = 1; it <= 2; ++it) {
    SCOPED_TRACE(it);
    const json plan = json_read(run() / "plans" / fmt::format("iter-{:08d}-replica0.json", it));
    ASSERT_TRUE(plan.contains("explain"));
    const json& ex = plan["explain"];
    EXPECT_EQ(ex.at("schedule"), "epp");
    ASSERT_FALSE(ex.at("candidates").empty());
    int chosen = 0;
    for (const json& c : ex.at("candidates")) {
      // Every candidate's setting and verdict is on the page.
      EXPECT_NE(html.find(escaped(c.at("verdict").get<std::string>())), std::string::npos)
          << c.dump();
      if (!c.at("chosen").get<bool>()) continue;
      ++chosen;
      EXPECT_EQ(c.at("predicted_step_time"), plan.at("predicted_step_time"));
      EXPECT_EQ(c.at("predicted_peak_bytes"), plan.at("predicted_peak_bytes"));
      EXPECT_NE(html.find("<tr class=\"chosen\"><td>&#9733;</td><td class=\"text\">" +
                          escaped(c.at("setting").get<std::string>()) + "</td>"),
                std::string::npos)
          << c.dump();
    }
    EXPECT_EQ(chosen, 1);
    EXPECT_NE(html.find(fmt::format("data-plan=\"{}-0\"", it)), std::string::npos);
  }
  // Two traced plans: the last shown, a selector for the other.
  EXPECT_NE(html.find("<option value=\"2-0\" selected>iteration 2, replica 0</option>"),
            std::string::npos);
  EXPECT_NE(html.find("<select id=\"explain-plan\">"), std::string::npos);

  // A damaged explanation is an error naming the file and the field, not a page without it.
  const fs::path first = run() / "plans" / "iter-00000001-replica0.json";
  json damaged = json_read(first);
  damaged["explain"]["candidates"][0]["chunks"] = "many";
  std::ofstream(first) << damaged.dump(1);
  const ShellResult bad = run_cli("report " + run().string());
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find(first.string()), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("explain: candidates[0]: chunks"), std::string::npos) << bad.output;
}

TEST_F(ReportExplainCli, WithoutTheFlagPlansCarryNoneAndThePageSaysHow) {
  const ShellResult t = run_cli(train(1, ""));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_FALSE(json_read(run() / "plans" / "iter-00000001-replica0.json").contains("explain"));
  const ShellResult r = run_cli("report " + run().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string html = text_of(run() / "report.html");
  EXPECT_NE(html.find("carry no explanation"), std::string::npos);
  EXPECT_NE(html.find("--trace-explain"), std::string::npos);
  EXPECT_EQ(html.find("explain-plan"), std::string::npos);
}

TEST_F(ReportExplainCli, TraceExplainWithoutTraceIsAUsageError) {
  const ShellResult r = run_cli("train " + corpus_train_args(1) + " --trace-explain");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--trace-explain explains the plans --trace saves"), std::string::npos)
      << r.output;
}

TEST_F(ReportExplainCli, PipelineRunExplainsOnThePlanningRank) {
  if (!have("mpirun")) GTEST_SKIP() << "mpirun is not installed";
  const ShellResult t = infinipipe::testing::shell_run(fmt::format(
      "mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 env OMP_NUM_THREADS=1 {} "
      "{} --pp 2",
      INFINIPIPE_BINARY, train(1, "--trace-explain")));
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const json plan = json_read(run() / "plans" / "iter-00000001-replica0.json");
  ASSERT_TRUE(plan.contains("explain"));
  EXPECT_FALSE(plan["explain"].at("candidates").empty());
  EXPECT_EQ(plan["explain"].at("recompute").size(), 0u) << "the device's memory needs none";
  const ShellResult r = run_cli("report " + run().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(text_of(run() / "report.html").find("Iteration 1, replica 0 (epp schedule)"),
            std::string::npos);
}

}  // namespace
