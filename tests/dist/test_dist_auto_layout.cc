// `mpirun -np N infinipipe train --pp auto --dp auto`: rank 0 searches the layouts of N ranks on
// the run's own batches, every rank trains with the one chosen, and the losses are those of the
// same layout given explicitly; the checkpoint's configuration holds the resolved degrees; with
// --vpp auto train runs the vpp the search ranked, as predicted; --outlier-delay is refused
// with an auto degree; at dp 2 the search predicts what the trained plans do, ranks sharing
// cores included.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/build_paths.h"
#include "common/shell_run.h"
#include "common/test_temp.h"
#include "common/text_count.h"
#include "corpus_dir_fixture.h"
#include "dist_test_util.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;

class DistAutoLayout : public disttest::CorpusDirTest {
 protected:
  DistAutoLayout() : CorpusDirTest("distauto") {}

  // 3 iterations of a small Llama under a 6 MiB budget (a pipeline of one stage does not fit
  // every layout), the cost model not refitted so two runs plan alike.
  std::string mpirun(int np, const std::string& layout, const std::string& metrics) const {
    return fmt::format(
        "timeout -s KILL 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np {} env "
        "OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive {} train --num-layers 4 --hidden-size 64 "
        "--num-attention-heads 4 --num-query-groups 2 --group-query-attention --seq-length 256 "
        "--global-batch-size 8 --device cpu --memory-budget 6MiB --cost-model-update off "
        "--train-iters 3 --data-path {} --metrics {} {}",
        np, INFINIPIPE_BINARY, (dir_ / "corpus").string(), metrics, layout);
  }

  static std::vector<std::string> losses(const std::string& metrics) {
    std::ifstream in(metrics);
    std::vector<std::string> out;
    const std::regex loss("\"loss\":([-0-9.e+]+)");
    std::smatch m;
    for (std::string line; std::getline(in, line);)
      if (std::regex_search(line, m, loss)) out.push_back(m[1]);
    return out;
  }

  // Trains with `auto` on np ranks, then with the layout it chose given as numbers.
  // `layouts`: how many (pp, dp) the search must have considered.
  void expect_auto_equals_explicit(int np, const std::string& auto_flags, int layouts) {
    const std::string auto_metrics = (dir_ / "auto.jsonl").string();
    const std::string ck = (dir_ / "ck").string();
    const testing::ShellResult a =
        testing::shell_run(mpirun(np, fmt::format("{} --save {}", auto_flags, ck), auto_metrics));
    ASSERT_EQ(a.exit_code, 0) << a.output;
    EXPECT_EQ(testing::text_count(a.output, "layout search over"), 1) << a.output;
    std::smatch m;
    const std::regex chosen(fmt::format(
        "layout search over {} ranks \\(what train runs: pp x dp, ulysses 1, schedule epp\\): pp "
        "([0-9]+) x vpp 1 x ulysses 1 x dp ([0-9]+), epp: predicted [0-9]+ tokens/s",
        np));
    ASSERT_TRUE(std::regex_search(a.output, m, chosen)) << a.output;
    const int pp = std::stoi(m[1]), dp = std::stoi(m[2]);
    EXPECT_EQ(pp * dp, np);
    // --search-iterations 4 (the default) samples at most the run's 3 iterations.
    EXPECT_NE(a.output.find(fmt::format("layouts of {}, 3 sampled batch(es)", layouts)),
              std::string::npos)
        << a.output;
    EXPECT_NE(a.output.find(fmt::format("pp {} x dp {}, 3 iterations", pp, dp)), std::string::npos)
        << a.output;

    const std::string given_metrics = (dir_ / "given.jsonl").string();
    const testing::ShellResult g =
        testing::shell_run(mpirun(np, fmt::format("--pp {} --dp {}", pp, dp), given_metrics));
    ASSERT_EQ(g.exit_code, 0) << g.output;
    EXPECT_EQ(g.output.find("layout search"), std::string::npos) << g.output;
    const std::vector<std::string> want = losses(given_metrics);
    ASSERT_EQ(want.size(), 3u) << g.output;
    EXPECT_EQ(losses(auto_metrics), want);

    // The checkpoint keeps the resolved degrees, not "auto".
    std::ifstream state(fs::path(ck) / "iter_0000003" / "state.json");
    std::stringstream text;
    text << state.rdbuf();
    EXPECT_NE(text.str().find(fmt::format("pipeline-model-parallel-size: {}\\n", pp)),
              std::string::npos);
    EXPECT_NE(text.str().find(fmt::format("data-parallel-size: {}\\n", dp)), std::string::npos);
    EXPECT_EQ(text.str().find(": auto\\n"), std::string::npos);
  }
};

// --pp auto alone: dp, not given, is searched along (pp 1 x dp 2 or pp 2 x dp 1).
TEST_F(DistAutoLayout, TwoRanksTrainTheChosenLayoutWithItsLosses) {
  expect_auto_equals_explicit(2, "--pp auto", 2);
}

TEST_F(DistAutoLayout, FourRanksTrainTheChosenLayoutWithItsLosses) {
  expect_auto_equals_explicit(4, "--pp auto --dp auto", 3);
}

// A fixed degree narrows the search: dp 2 of 4 ranks leaves pp 2.
TEST_F(DistAutoLayout, FixedDegreeIsKeptAndVppAutoNeedsVirtualStages) {
  const testing::ShellResult a = testing::shell_run(
      mpirun(4, "--pp auto --dp 2 --train-iters 1", (dir_ / "m.jsonl").string()));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("pp 2 x vpp 1 x ulysses 1 x dp 2, epp"), std::string::npos) << a.output;
  // --outlier-delay's batches depend on the pipeline, which the search has not chosen yet.
  const testing::ShellResult d = testing::shell_run(
      mpirun(4, "--pp auto --dp 2 --outlier-delay --train-iters 1", (dir_ / "d.jsonl").string()));
  EXPECT_EQ(d.exit_code, 2) << d.output;
  EXPECT_NE(d.output.find("give --pp N and --vpp N"), std::string::npos) << d.output;
  const testing::ShellResult v = testing::shell_run(
      mpirun(2, "--vpp auto --schedule 1f1b --train-iters 1", (dir_ / "v.jsonl").string()));
  EXPECT_EQ(v.exit_code, 2) << v.output;
  EXPECT_EQ(testing::text_count(v.output, "infinipipe: error"), 1) << v.output;
  EXPECT_NE(v.output.find("use --schedule epp or interleaved"), std::string::npos) << v.output;
}

// With --vpp auto train runs the vpp the search ranked first (its best(), whatever the rest of
// the ranking holds), and the search's prediction is that of the trained plans: the same batches,
// the same plans. Returns the vpp trained.
int expect_trains_the_ranked_vpp(const testing::ShellResult& a, const std::string& schedule,
                                 const std::string& metrics) {
  EXPECT_EQ(a.exit_code, 0) << a.output;
  std::smatch m;
  const std::regex chosen(fmt::format(
      "schedule {0}\\): pp 2 x vpp ([0-9]+) x ulysses 1 x dp 1, {0}: predicted ([0-9]+) tokens/s",
      schedule));
  if (!std::regex_search(a.output, m, chosen)) {
    ADD_FAILURE() << "no chosen layout in\n" << a.output;
    return 0;
  }
  const int vpp = std::stoi(m[1]);
  const double ranked_tokens_per_s = std::stod(m[2]);
  std::ifstream in(metrics);
  double tokens = 0, predicted = 0;
  int iterations = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.contains("plan_knobs")) continue;
    const std::string knobs = j.at("plan_knobs").get<std::string>();
    EXPECT_EQ(knobs.find("vpp=") != std::string::npos, vpp > 1) << knobs;
    if (vpp > 1) {
      EXPECT_NE(knobs.find(fmt::format("vpp={}", vpp)), std::string::npos) << knobs;
    }
    tokens += j.at("tokens").get<double>();
    predicted += j.at("predicted_step_seconds").get<double>();
    ++iterations;
  }
  EXPECT_EQ(iterations, 3) << a.output;
  // The printed figure is rounded to a token per second.
  if (iterations > 0) {
    EXPECT_NEAR(tokens / predicted, ranked_tokens_per_s, 0.5 + 1e-9 * ranked_tokens_per_s);
  }
  return vpp;
}

// EPP: under a budget where the vpp choices are close (near 4.6 MiB two virtual stages per rank
// have won, at 5 MiB one), so either may win; what holds is that train trains the winner.
TEST_F(DistAutoLayout, VppAutoTrainsTheVppTheSearchRanked) {
  const std::string metrics = (dir_ / "vpp.jsonl").string();
  const testing::ShellResult a = testing::shell_run(
      mpirun(2, "--pp 2 --vpp auto --search-iterations 3 --memory-budget 4.6MiB", metrics));
  expect_trains_the_ranked_vpp(a, "epp", metrics);
}

// Virtual stages through auto, not by a close margin: the interleaved schedule needs vpp >= 2,
// so with 4 layers on pp 2 the search's only candidate is vpp 2, and train trains it as ranked.
TEST_F(DistAutoLayout, VppAutoOverInterleavedTrainsVirtualStages) {
  const std::string metrics = (dir_ / "interleaved.jsonl").string();
  const testing::ShellResult a = testing::shell_run(
      mpirun(2, "--pp 2 --vpp auto --schedule interleaved --search-iterations 3", metrics));
  EXPECT_EQ(expect_trains_the_ranked_vpp(a, "interleaved", metrics), 2) << a.output;
}

// dp 2 on 4 ranks: the search plans each replica with the hosts train measures (on a machine of
// fewer than 4 cores the ranks share them, and the plans' actions run slower), so its prediction
// is that of the trained plans: per batch the slowest replica's predicted step. The search also
// charges the modelled data-parallel all-reduce, which a plan's predicted step leaves out
// without a measured tail (--cost-model-update off): the search's tokens/s is at most train's,
// by that all-reduce (0.3% here). Before the search knew the hosts it said 1.56x train's.
TEST_F(DistAutoLayout, DpTwoTrainsAtTheSearchsPrediction) {
  const std::string metrics = (dir_ / "dp2.jsonl").string();
  const testing::ShellResult a =
      testing::shell_run(mpirun(4, "--pp auto --dp 2", metrics));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      a.output, m,
      std::regex("pp 2 x vpp 1 x ulysses 1 x dp 2, epp: predicted ([0-9]+) tokens/s")))
      << a.output;
  const double ranked_tokens_per_s = std::stod(m[1]);
  // Rank 0 is replica 0's first stage, rank 1 replica 1's (rank = stage x dp + replica).
  std::vector<std::vector<nlohmann::json>> replicas(2);
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(r == 0 ? metrics : (dir_ / "dp2-rank00001.jsonl").string());
    for (std::string line; std::getline(in, line);)
      replicas[static_cast<size_t>(r)].push_back(nlohmann::json::parse(line));
  }
  ASSERT_EQ(replicas[0].size(), 3u) << a.output;
  ASSERT_EQ(replicas[1].size(), 3u) << a.output;
  double tokens = 0, slowest = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(replicas[0][i].at("tokens"), replicas[1][i].at("tokens"));  // the global batch's
    tokens += replicas[0][i].at("tokens").get<double>();
    slowest += std::max(replicas[0][i].at("predicted_step_seconds").get<double>(),
                        replicas[1][i].at("predicted_step_seconds").get<double>());
  }
  const double trained_tokens_per_s = tokens / slowest;
  // The printed figure is rounded to a token per second.
  EXPECT_LE(ranked_tokens_per_s, trained_tokens_per_s + 0.5) << a.output;
  EXPECT_GE(ranked_tokens_per_s, 0.99 * trained_tokens_per_s) << a.output;
}

}  // namespace
}  // namespace infinipipe
