// Configuration arithmetic and hints on hostile sizes: refused with the reason, never wrapped,
// never slow.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "common/error_text.h"
#include "core/config.h"
#include "core/error.h"

namespace infinipipe {
namespace {

// The message, and the seconds validate() took: a hint must not search up to the size.
std::pair<std::string, double> timed_error_of(const Config& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string e = testing::validate_error(cfg);
  return {e, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

TEST(ConfigBounds, HugeHiddenSizeNotDivisibleByHeadsIsQuick) {
  Config c;
  c.model.hidden_size = INT64_MAX - 1;
  c.model.num_attention_heads = 4000000000000000000;
  const auto [e, seconds] = timed_error_of(c);
  EXPECT_NE(e.find("is not divisible by num-attention-heads"), std::string::npos) << e;
  EXPECT_LT(seconds, 2.0);
}

TEST(ConfigBounds, HeadsHintStillNamesNearbyDivisors) {
  Config c;
  c.model.hidden_size = 512;
  c.model.num_attention_heads = 6;
  EXPECT_NE(testing::validate_error(c).find("use num-attention-heads 2/4/8"), std::string::npos)
      << testing::validate_error(c);
}

TEST(ConfigBounds, HugeLayerCountsAreRefused) {
  Config c;
  c.model.num_layers = 4294967296;
  EXPECT_NE(testing::validate_error(c).find("num-layers 4294967296 exceeds 65536"),
            std::string::npos)
      << testing::validate_error(c);
  c.model.num_layers = INT64_MAX - 1;
  c.parallel.pipeline_parallel = 2;
  c.parallel.virtual_stages = 3;
  c.parallel.schedule = Schedule::interleaved;
  c.cluster.num_devices = 2;
  const auto [e, seconds] = timed_error_of(c);
  EXPECT_NE(e, "");
  EXPECT_LT(seconds, 2.0);
}

TEST(ConfigBounds, PipelineHintIsBounded) {
  Config c;
  c.model.num_layers = 65533;  // prime-ish counts make the hint scan its whole range
  c.parallel.pipeline_parallel = 2;
  c.parallel.virtual_stages = 2;
  c.parallel.schedule = Schedule::interleaved;
  c.cluster.num_devices = 2;
  const auto [e, seconds] = timed_error_of(c);
  EXPECT_NE(e.find("is not divisible by pipeline-model-parallel-size 2"), std::string::npos) << e;
  EXPECT_LT(seconds, 2.0);
}

TEST(ConfigBounds, SizesWhoseProductsOverflowAreRefused) {
  Config c;
  c.model.ffn_hidden_size = INT64_MAX;
  EXPECT_NE(testing::validate_error(c).find("too large"), std::string::npos)
      << testing::validate_error(c);
  c = Config{};
  c.model.hidden_size = int64_t{1} << 40;
  c.model.num_attention_heads = 1 << 10;
  EXPECT_NE(testing::validate_error(c).find("too large to count in 64-bit integers"),
            std::string::npos)
      << testing::validate_error(c);
  c = Config{};
  c.model.seq_length = int64_t{1} << 50;
  c.model.max_position_embeddings = int64_t{1} << 50;
  EXPECT_NE(testing::validate_error(c).find("too large to count in 64-bit integers"),
            std::string::npos)
      << testing::validate_error(c);
}

TEST(ConfigBounds, DegreesAreBounded) {
  Config c;
  c.parallel.pipeline_parallel = int64_t{1} << 40;
  c.parallel.data_parallel = int64_t{1} << 40;
  EXPECT_NE(testing::validate_error(c).find("exceeds 1048576 devices"), std::string::npos)
      << testing::validate_error(c);
  c = Config{};
  c.parallel.layers_per_virtual_stage = INT64_MAX;
  c.parallel.pipeline_parallel = 4;
  EXPECT_NE(testing::validate_error(c).find("num-layers-per-virtual-pipeline-stage"),
            std::string::npos)
      << testing::validate_error(c);
  c = Config{};
  c.cluster.num_devices = INT64_MAX;
  c.cluster.devices_per_node = INT64_MAX - 1;
  EXPECT_NE(testing::validate_error(c).find("exceeds 2^40"), std::string::npos)
      << testing::validate_error(c);
}

}  // namespace
}  // namespace infinipipe
