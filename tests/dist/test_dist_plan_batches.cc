// `plan --data-path --iteration I` plans train's batch I: the sequences of every replica's plan
// equal those of the plan replica r ran in iteration I + 1 of `mpirun -np 2 infinipipe train`
// (pp 1 × dp 2, traced), with the sampler's shuffle and the outlier delay, and the replicas of
// each iteration hold every sequence of the batch once between them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/build_paths.h"
#include "common/shell_run.h"
#include "corpus_dir_fixture.h"
#include "dist_test_util.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;

class DistPlanBatches : public disttest::CorpusDirTest {
 protected:
  DistPlanBatches() : CorpusDirTest("distplanbatches") {}

  static std::vector<int64_t> seq_lengths(const fs::path& plan) {
    std::ifstream in(plan);
    EXPECT_TRUE(in.good()) << plan;
    if (!in.good()) return {};
    return nlohmann::json::parse(in).at("seq_lengths").get<std::vector<int64_t>>();
  }
};

TEST_F(DistPlanBatches, PlanReadsTrainsBatchesAndSplitsThemAsTrainDoes) {
  // Web-like lengths up to 4096 tokens in batches of 4: long documents wait in the delay's
  // queue and are released two at a time (batches 2..5 carry them).
  const std::string web = (dir_ / "web").string();
  testing::ShellResult j = testing::shell_run(fmt::format(
      "{} data synth --distribution commoncrawl --num-documents 120 --seq-length 4096 --seed 3 "
      "--output {}",
      INFINIPIPE_BINARY, web));
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const std::string model =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 4096 "
      "--global-batch-size 4 --min-tail-slice 32 --device cpu --outlier-delay --pp 1 "
      "--data-parallel-size 2 --data-path " + web;
  const int iters = 6;
  int released = 0;
  const fs::path trace = dir_ / "trace";
  j = testing::shell_run(fmt::format(
      "timeout -s KILL 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 env "
      "OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive {} train {} --train-iters {} --quiet "
      "--cost-model-update off --trace {}",
      INFINIPIPE_BINARY, model, iters, trace.string()));
  ASSERT_EQ(j.exit_code, 0) << j.output;
  for (int it = 0; it < iters; ++it) {
    SCOPED_TRACE(fmt::format("iteration {}", it));
    const fs::path out = dir_ / fmt::format("p{}.json", it);
    j = testing::shell_run(fmt::format(
        "{} plan {} --num-devices 2 --iteration {} --replica all "
        "--out {}",
        INFINIPIPE_BINARY, model, it, out.string()));
    ASSERT_EQ(j.exit_code, 0) << j.output;
    EXPECT_NE(j.output.find(fmt::format("outlier delay: batch {} released", it)),
              std::string::npos)
        << j.output;
    released += j.output.find(fmt::format("batch {} released 2", it)) != std::string::npos;
    std::vector<int64_t> all;
    for (int r = 0; r < 2; ++r) {
      const auto planned = seq_lengths(dir_ / fmt::format("p{}.r{}.json", it, r));
      const auto trained = seq_lengths(
          trace / "plans" / fmt::format("iter-{:08d}-replica{}.json", it + 1, r));
      EXPECT_EQ(planned, trained) << "replica " << r;
      all.insert(all.end(), planned.begin(), planned.end());
    }
    EXPECT_EQ(all.size(), 4u) << "every document of the batch on one replica";
  }
  EXPECT_GT(released, 0) << "no batch carried released outliers: the delay went untested";
}

}  // namespace
}  // namespace infinipipe
