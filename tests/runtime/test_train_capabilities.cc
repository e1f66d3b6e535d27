// The runtimes' one table of what each cannot honour (runtime/train_capabilities.h): each option
// is refused by exactly the runtimes that do not run it, with a message naming the runtime and
// the fix; a flag a runtime refuses is refused when given at its default too.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/train_capabilities.h"

namespace infinipipe::runtime {
namespace {

constexpr TrainRuntime kAll[] = {TrainRuntime::engine, TrainRuntime::torch,
                                 TrainRuntime::transformers};

// Whether `runtime` refuses `cfg` with a message containing `words`.
bool refuses(const Config& cfg, TrainRuntime runtime, const std::string& words,
             const std::vector<std::string>& given = {}) {
  for (const std::string& p : train_config_problems(cfg, 0, runtime, given))
    if (p.find(words) != std::string::npos) return true;
  return false;
}

TEST(TrainCapabilities, TheDefaultsTrainEverywhere) {
  for (TrainRuntime r : kAll) EXPECT_TRUE(train_config_problems(Config{}, 0, r).empty());
}

TEST(TrainCapabilities, EachOptionIsRefusedByTheRuntimesThatDoNotRunIt) {
  Config zero;
  zero.parallel.zero_stage = 3;
  EXPECT_TRUE(refuses(zero, TrainRuntime::engine, "infinipipe train keeps a stage's weights"));
  EXPECT_TRUE(refuses(zero, TrainRuntime::torch, "the PyTorch trainer keeps a stage's weights"));
  EXPECT_TRUE(refuses(zero, TrainRuntime::transformers, "--zero-stage"));

  Config bf16;
  bf16.training.bf16 = true;
  EXPECT_TRUE(refuses(bf16, TrainRuntime::engine, "drop --bf16"));
  EXPECT_TRUE(train_config_problems(bf16, 0, TrainRuntime::torch).empty());

  Config qwen2;
  qwen2.model.add_qkv_bias = true;
  EXPECT_TRUE(refuses(qwen2, TrainRuntime::engine, "--hf-model DIR"));
  EXPECT_TRUE(refuses(qwen2, TrainRuntime::torch, "infinipipe.torch's own modules"));
  EXPECT_TRUE(train_config_problems(qwen2, 0, TrainRuntime::transformers).empty());

  Config links;
  links.cluster.measure_links = true;
  EXPECT_FALSE(refuses(links, TrainRuntime::engine, "--measure-links"));
  EXPECT_TRUE(refuses(links, TrainRuntime::torch, "--measure-links and"));
  EXPECT_TRUE(refuses(links, TrainRuntime::transformers, "--measure-links and"));
}

TEST(TrainCapabilities, AFlagGivenAtItsDefaultIsRefusedToo) {
  const Config cfg;  // --measure-links-interval 100 leaves the configuration as it was
  EXPECT_TRUE(train_config_problems(cfg, 0, TrainRuntime::torch).empty());
  EXPECT_TRUE(refuses(cfg, TrainRuntime::torch, "--measure-links-interval are",
                      {"--measure-links-interval"}));
  EXPECT_FALSE(refuses(cfg, TrainRuntime::engine, "--measure-links-interval",
                       {"--measure-links-interval"}));
}

TEST(TrainCapabilities, TheEngineCountsItsProcesses) {
  Config cfg;
  cfg.parallel.pipeline_parallel = 2;
  const auto first = [](const std::vector<std::string>& v) { return v.empty() ? "" : v[0]; };
  EXPECT_NE(first(train_config_problems(cfg, 1, TrainRuntime::engine))
                .find("must equal the number of processes"),
            std::string::npos);
  EXPECT_TRUE(train_config_problems(cfg, 2, TrainRuntime::engine).empty());
  // The PyTorch trainer's world (pp × dp × Ulysses) is checked when its groups are made.
  EXPECT_TRUE(train_config_problems(cfg, 1, TrainRuntime::torch).empty());
}

}  // namespace
}  // namespace infinipipe::runtime
