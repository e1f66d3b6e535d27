// `plan --search-layout` / `simulate --search-layout` through the binary: the ranking table, the
// JSON of --out, and the errors for options that do not go with it; `auto` degrees outside
// `train` (`config show` and `check` keep them); `train --pp auto` in one process.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/run_cli.h"
#include "common/test_temp.h"

namespace {

namespace fs = std::filesystem;

// A small model on 8 A800s, 4 per node, one batch of 16 synthetic GitHub-like sequences.
const std::string kSmallSearch =
    "--device a800-80gb --bf16 --num-layers 8 --hidden-size 1024 --num-attention-heads 8 "
    "--vocab-size 32000 --seq-length 16384 --global-batch-size 16 --num-devices 8 "
    "--devices-per-node 4 --distribution github";

TEST(LayoutSearchCli, PlanPrintsTheRankingAndWritesItsJson) {
  const fs::path dir = infinipipe::test::test_temp_path("layoutcli");
  fs::create_directories(dir);
  const std::string json = (dir / "layouts.json").string();
  const ShellResult r =
      run_cli("plan --search-layout --search-iterations 2 " + kSmallSearch + " --out " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("layout search: 8 devices (4 per node), 2 sampled batch(es)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("| rank | pp | vpp | ulysses | dp | schedule | tokens/s |"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("\nbest: "), std::string::npos) << r.output;
  std::ifstream in(json);
  ASSERT_TRUE(in) << r.output;
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("num_devices"), 8);
  EXPECT_EQ(j.at("batches"), 2);
  const nlohmann::json& first = j.at("layouts").at(0);
  EXPECT_EQ(first.at("rank"), 1);
  EXPECT_EQ(first.at("pp").get<int64_t>() * first.at("ulysses").get<int64_t>() *
                first.at("dp").get<int64_t>(),
            8);
  // The table's first row is the JSON's first layout.
  EXPECT_NE(r.output.find(fmt::format("| 1 | {} | {} | {} | {} | {} |", first.at("pp").get<int>(),
                                      first.at("vpp").get<int>(), first.at("ulysses").get<int>(),
                                      first.at("dp").get<int>(),
                                      first.at("schedule").get<std::string>())),
            std::string::npos)
      << r.output;
  // Without --out the plan's default file is not written.
  const ShellResult s = run_cli("plan --search-layout " + kSmallSearch);
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(s.output.find("wrote"), std::string::npos) << s.output;
  fs::remove_all(dir);
}

TEST(LayoutSearchCli, SimulateSearchesToo) {
  const ShellResult r = run_cli("simulate --search-layout " + kSmallSearch);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("layout search: 8 devices"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\ninfeasible:\n"), std::string::npos) << r.output;
}

// Without --search-layout-exhaustive, layouts whose bound is below the best are listed as not
// evaluated (with the bound); with it every layout is planned. The best is the same.
TEST(LayoutSearchCli, ExhaustivePlansEveryLayoutAndKeepsTheBest) {
  const fs::path dir = infinipipe::test::test_temp_path("layoutcli_exhaustive");
  fs::create_directories(dir);
  const std::string pruned_json = (dir / "pruned.json").string();
  const std::string all_json = (dir / "all.json").string();
  const ShellResult pruned = run_cli("plan --search-layout " + kSmallSearch + " --out " + pruned_json);
  const ShellResult all = run_cli("plan --search-layout --search-layout-exhaustive " + kSmallSearch +
                                  " --out " + all_json);
  ASSERT_EQ(pruned.exit_code, 0) << pruned.output;
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_NE(pruned.output.find("\nnot evaluated (their bound on tokens/s is below the best"),
            std::string::npos)
      << pruned.output;
  EXPECT_EQ(all.output.find("not evaluated"), std::string::npos) << all.output;
  const auto best_line = [](const std::string& out) {
    const size_t at = out.find("\nbest: ");
    return out.substr(at, out.find(" (best of", at) - at);
  };
  EXPECT_EQ(best_line(pruned.output), best_line(all.output));
  std::ifstream pin(pruned_json), ain(all_json);
  const nlohmann::json p = nlohmann::json::parse(pin), a = nlohmann::json::parse(ain);
  ASSERT_EQ(p.at("layouts").size(), a.at("layouts").size());
  int skipped = 0;
  for (const nlohmann::json& x : p.at("layouts")) {
    if (x.at("evaluated").get<bool>()) continue;
    ++skipped;
    EXPECT_FALSE(x.at("feasible").get<bool>());
    EXPECT_GE(x.at("bound_tokens_per_s").get<double>(),
              x.at("stop_bound_tokens_per_s").get<double>())
        << x;
    EXPECT_LT(x.at("stop_bound_tokens_per_s").get<double>(),
              p.at("layouts").at(0).at("tokens_per_s").get<double>())
        << x;
    EXPECT_LT(x.at("plans_made").get<int64_t>(), x.at("replica_plans").get<int64_t>()) << x;
    for (const nlohmann::json& y : a.at("layouts"))  // planned, it is slower than the best
      if (y.at("pp") == x.at("pp") && y.at("vpp") == x.at("vpp") &&
          y.at("ulysses") == x.at("ulysses") && y.at("dp") == x.at("dp") &&
          y.at("schedule") == x.at("schedule") && y.at("feasible").get<bool>()) {
        EXPECT_LT(y.at("tokens_per_s").get<double>(),
                  a.at("layouts").at(0).at("tokens_per_s").get<double>());
      }
    EXPECT_EQ(x.at("reason").get<std::string>().rfind("not evaluated: at most ", 0), 0u) << x;
  }
  EXPECT_GT(skipped, 0);
  for (const nlohmann::json& x : a.at("layouts")) EXPECT_TRUE(x.at("evaluated").get<bool>()) << x;
  fs::remove_all(dir);
}

TEST(LayoutSearchCli, OptionsThatDoNotGoWithTheSearchAreErrors) {
  for (const std::string& args :
       {"plan --search-iterations 2 " + kSmallSearch, "plan --search-layout --explain " + kSmallSearch,
        "plan --search-layout --replica 1 " + kSmallSearch,
        "plan --search-layout --search-iterations 0 " + kSmallSearch, "plan --search-threads 2 " + kSmallSearch,
        "plan --search-layout --search-threads -1 " + kSmallSearch,
        "plan --search-layout-exhaustive " + kSmallSearch,
        "simulate --search-layout --compare " + kSmallSearch, "simulate --out x.json " + kSmallSearch}) {
    const ShellResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("infinipipe: error"), std::string::npos) << args << "\n" << r.output;
  }
}

TEST(LayoutSearchCli, AutoDegreesAreForTrainOnly) {
  for (const char* flag : {"--pp auto", "--dp auto", "--vpp auto", "--ulysses-degree auto"}) {
    const ShellResult r = run_cli(std::string("plan --distribution github ") + flag);
    EXPECT_EQ(r.exit_code, 2) << flag << "\n" << r.output;
    EXPECT_NE(r.output.find("auto is chosen by `infinipipe train`"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("--search-layout"), std::string::npos) << r.output;
  }
  const ShellResult neg = run_cli("config show --pp -1");
  EXPECT_EQ(neg.exit_code, 2) << neg.output;
  EXPECT_NE(neg.output.find("must be a positive integer or auto"), std::string::npos) << neg.output;
}

// `config show` and `config check` keep an auto degree as auto (it is train's to choose), check
// the rest as train does before its search, and what show prints checks back.
TEST(LayoutSearchCli, ConfigShowAndCheckKeepAutoDegrees) {
  const fs::path dir = infinipipe::test::test_temp_path("layoutcli_config");
  fs::create_directories(dir);
  const std::string file = (dir / "auto.yaml").string();
  std::ofstream(file) << "pp: auto\nvirtual-pipeline-model-parallel-size: auto\nnum-layers: 8\n";
  const ShellResult show = run_cli("config show --config " + file + " --dp auto");
  ASSERT_EQ(show.exit_code, 0) << show.output;
  for (const char* line :
       {"\npipeline-model-parallel-size: auto\n", "\ndata-parallel-size: auto\n",
        "\nvirtual-pipeline-model-parallel-size: auto\n", "\nulysses-degree: 1\n",
        "\nnum-layers: 8\n"})
    EXPECT_NE(("\n" + show.output).find(line), std::string::npos) << line << "\n" << show.output;
  const std::string shown = (dir / "shown.yaml").string();
  std::ofstream(shown) << show.output;
  for (const std::string& f : {file, shown}) {
    const ShellResult check = run_cli("config check " + f);
    ASSERT_EQ(check.exit_code, 0) << check.output;
    EXPECT_NE(check.output.find("ok (its auto degrees are chosen by train's layout search)"),
              std::string::npos)
        << check.output;
  }
  EXPECT_EQ(run_cli("config show --diff-megatron --pp auto").exit_code, 0);
  // The rest is still checked, and a degree given as a number too.
  for (const char* bad : {"--pp auto --min-lr 1", "--pp auto --dp 0",
                          "--pp auto --num-layers-per-virtual-pipeline-stage 2"}) {
    const ShellResult r = run_cli(std::string("config show ") + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("infinipipe: error"), std::string::npos) << bad << "\n" << r.output;
  }
  fs::remove_all(dir);
}

TEST(LayoutSearchCli, TrainInOneProcessResolvesAutoToOneRank) {
  const fs::path dir = infinipipe::test::test_temp_path("layoutcli_train");
  fs::create_directories(dir);
  const std::string corpus = (dir / "corpus").string();
  ASSERT_EQ(run_cli("data synth --output " + corpus + " --seq-length 128").exit_code, 0);
  const std::string common =
      " --num-layers 2 --hidden-size 32 --num-attention-heads 2 --seq-length 128 "
      "--global-batch-size 4 --train-iters 1 --cost-model-update off --data-path " +
      corpus;
  const ShellResult r = run_cli("train --pp auto --dp auto --search-iterations 2" + common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("layout search over 1 ranks (what train runs: pp x dp, ulysses 1, "
                          "schedule epp): pp 1 x vpp 1 x ulysses 1 x dp 1, epp: predicted"),
            std::string::npos)
      << r.output;
  // At most the run's batches: --train-iters 1.
  EXPECT_NE(r.output.find("1 sampled batch(es)"), std::string::npos) << r.output;
  const ShellResult none = run_cli("train --pp auto --memory-budget 64KiB" + common);
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("no layout can run this workload:\n  pp 1 x vpp 1 x ulysses 1 x dp 1, "
                             "epp: over budget by"),
            std::string::npos)
      << none.output;
  const ShellResult per =
      run_cli("train --pp auto --num-layers-per-virtual-pipeline-stage 1" + common);
  EXPECT_EQ(per.exit_code, 2) << per.output;
  EXPECT_NE(per.output.find("give --vpp N (or --vpp auto) instead"), std::string::npos)
      << per.output;
  const ShellResult i = run_cli("train --search-iterations 2" + common);
  EXPECT_EQ(i.exit_code, 2) << i.output;
  EXPECT_NE(i.output.find("--search-iterations sizes the layout search"), std::string::npos)
      << i.output;
  fs::remove_all(dir);
}

}  // namespace
