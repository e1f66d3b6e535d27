// `infinipipe plan` as a user runs it: a memory budget too small under the user's own recompute
// setting is a configuration error (exit 2) whose least budget really fits that setting.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_dir_test.h"
#include "cli/run_cli.h"
#include "common/build_paths.h"

namespace {

const std::string kSmall = fmt::format(
    "plan --config {0}/examples/cpu-small.yaml --lengths {0}/examples/lengths-small.txt "
    "--schedule 1f1b --recompute-granularity none ",
    INFINIPIPE_SOURCE_DIR);

// The byte count in "... the smallest budget that fits is X (N bytes, for rank R) ...": what a
// user copies into --memory-budget.
std::string least_bytes(const std::string& output) {
  const std::string key = "the smallest budget that fits is ";
  const auto at = output.find(key);
  if (at == std::string::npos) return "";
  const auto open = output.find('(', at);
  const auto end = output.find(" bytes", open);
  if (open == std::string::npos || end == std::string::npos) return "";
  return output.substr(open + 1, end - open - 1);
}

class PlanCli : public CliDirTest {};

TEST_F(PlanCli, TooSmallBudgetWithoutRecomputeExitsTwoNamingABudgetThatFits) {
  const ShellResult r = run_cli(kSmall + "--memory-budget 320MiB");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("too small"), std::string::npos) << r.output;
  const std::string least = least_bytes(r.output);
  ASSERT_FALSE(least.empty()) << r.output;
  EXPECT_GT(std::stoll(least), int64_t{320} << 20) << r.output;
  const ShellResult ok =
      run_cli(kSmall + "--memory-budget " + least + " --out " + (dir_ / "plan.json").string());
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("no recompute"), std::string::npos) << ok.output;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The example below its own tight budget (310 of 320 MiB, where some K fits no grouping):
// --explain prints the candidates (the chosen one marked, one over budget) and adds only the
// "explain" field to the plan it writes.
TEST_F(PlanCli, ExplainPrintsTheSearchAndAddsOnlyTheExplainField) {
  const std::string example = fmt::format(
      "plan --config {0}/examples/cpu-small.yaml --lengths {0}/examples/lengths-small.txt "
      "--memory-budget 310MiB ",
      INFINIPIPE_SOURCE_DIR);
  const ShellResult plain = run_cli(example + "--out " + (dir_ / "plain.json").string());
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("candidates ("), std::string::npos) << plain.output;
  const ShellResult why =
      run_cli(example + "--explain --out " + (dir_ / "explained.json").string());
  ASSERT_EQ(why.exit_code, 0) << why.output;
  EXPECT_NE(why.output.find("candidates ("), std::string::npos) << why.output;
  EXPECT_NE(why.output.find("-> chosen"), std::string::npos) << why.output;
  EXPECT_NE(why.output.find("over budget by"), std::string::npos) << why.output;
  EXPECT_NE(why.output.find("T_t = "), std::string::npos) << why.output;

  nlohmann::json j = nlohmann::json::parse(read_text(dir_ / "explained.json"));
  ASSERT_TRUE(j.contains("explain"));
  EXPECT_FALSE(j["explain"]["candidates"].empty());
  j.erase("explain");
  EXPECT_EQ(j.dump(1) + "\n", read_text(dir_ / "plain.json"));
  const ShellResult sim =
      run_cli("simulate --plan " + (dir_ / "explained.json").string() +
              fmt::format(" --config {}/examples/cpu-small.yaml", INFINIPIPE_SOURCE_DIR));
  EXPECT_EQ(sim.exit_code, 0) << sim.output;
}

}  // namespace
