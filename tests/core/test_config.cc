#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/error_text.h"
#include "core/config.h"
#include "core/error.h"
#include "core/strings.h"

namespace infinipipe {
namespace {

using testing::validate_error;

TEST(Config, DefaultsAreValid) {
  EXPECT_EQ(validate_error(Config{}), "");
}

TEST(Config, LayersNotDivisibleByVirtualStagesSaysHowToFix) {
  Config c;
  c.model.num_layers = 30;
  c.parallel.pipeline_parallel = 4;
  c.parallel.virtual_stages = 2;
  c.parallel.schedule = Schedule::interleaved;
  std::string e = validate_error(c);
  EXPECT_NE(e.find("num-layers 30 is not divisible by pipeline-model-parallel-size 4"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("use 32 layers"), std::string::npos) << e;
  EXPECT_NE(e.find("pp 3/5/15"), std::string::npos) << e;
}

TEST(Config, UnevenLayersAllowedWithoutVirtualStages) {
  Config c;  // layers are split by cost, so 10 layers on pp 4 is fine
  c.model.num_layers = 10;
  c.parallel.pipeline_parallel = 4;
  EXPECT_EQ(validate_error(c), "");
  EXPECT_EQ(c.parallel.pipeline_parallel, 4);
}

TEST(Config, TooFewLayersForStages) {
  Config c;
  c.model.num_layers = 2;
  c.parallel.pipeline_parallel = 4;
  EXPECT_NE(validate_error(c).find("every stage needs a layer"), std::string::npos);
}

TEST(Config, HeadsMustDivideHidden) {
  Config c;
  c.model.hidden_size = 500;
  std::string e = validate_error(c);
  EXPECT_NE(e.find("hidden-size 500 is not divisible by num-attention-heads 8"), std::string::npos)
      << e;
}

TEST(Config, QueryGroupsMustDivideHeads) {
  Config c;
  c.model.num_query_groups = 3;
  std::string e = validate_error(c);
  EXPECT_NE(e.find("num-attention-heads 8 is not divisible by num-query-groups 3"),
            std::string::npos)
      << e;
}

TEST(Config, DevicesMustMatchDegrees) {
  Config c;
  c.parallel.pipeline_parallel = 2;
  c.parallel.data_parallel = 2;
  c.cluster.num_devices = 8;
  c.cluster.devices_per_node = 8;
  std::string e = validate_error(c);
  EXPECT_NE(e.find("set --num-devices 4"), std::string::npos) << e;
}

TEST(Config, DevicesDefaultToDegrees) {
  Config c;
  c.parallel.pipeline_parallel = 2;
  c.parallel.data_parallel = 3;
  c.validate();
  EXPECT_EQ(c.cluster.num_devices, 6);
  EXPECT_EQ(c.cluster.devices_per_node, 6);
}

TEST(Config, UlyssesMustFitInNode) {
  Config c;
  c.parallel.ulysses_degree = 4;
  c.cluster.num_devices = 4;
  c.cluster.devices_per_node = 2;
  c.cluster.num_devices = 4;
  std::string e = validate_error(c);
  EXPECT_NE(e.find("ulysses-degree 4 does not divide devices-per-node 2"), std::string::npos) << e;
}

TEST(Config, LayersPerVirtualStageResolvesToVpp) {
  Config c;
  c.model.num_layers = 16;
  c.parallel.pipeline_parallel = 2;
  c.parallel.layers_per_virtual_stage = 2;
  c.parallel.schedule = Schedule::interleaved;
  c.validate();
  EXPECT_EQ(c.parallel.virtual_stages, 4);
}

TEST(Config, TrainingChecks) {
  Config c;
  c.training.min_lr = 1.0;
  EXPECT_NE(validate_error(c).find("lower --min-lr"), std::string::npos);
  c = Config{};
  c.training.save_interval = 10;  // without --save: nothing saved, as Megatron-LM
  EXPECT_NO_THROW(c.validate());
  c.training.save_interval = -1;
  EXPECT_NE(validate_error(c).find("save-interval must be >= 0"), std::string::npos);
  c = Config{};
  c.training.adam_beta2 = 1.0;
  EXPECT_NE(validate_error(c).find("adam-beta2 must be in [0, 1)"), std::string::npos);
  c = Config{};
  c.parallel.data_parallel = 4;
  c.training.global_batch_size = 2;
  EXPECT_NE(validate_error(c).find("raise --global-batch-size"), std::string::npos);
}

TEST(Config, RecomputeFullNeedsLayers) {
  Config c;
  c.parallel.recompute_granularity = RecomputeGranularity::full;
  EXPECT_NE(validate_error(c).find("--recompute-num-layers N"), std::string::npos);
  c.parallel.recompute_method = RecomputeMethod::block;
  c.parallel.recompute_num_layers = 99;
  EXPECT_NE(validate_error(c).find("exceeds the 8 layers of a stage"), std::string::npos);
  // Megatron's uniform method with groups of N > 1 layers keeps one input per group: refused.
  c.parallel.recompute_method = RecomputeMethod::uniform;
  c.parallel.recompute_num_layers = 2;
  EXPECT_NE(validate_error(c).find("use --recompute-num-layers 1"), std::string::npos);
  c.parallel.recompute_num_layers = 1;
  EXPECT_EQ(validate_error(c), "");
}

TEST(Config, GroupQueryAttentionAloneIsOneQueryGroup) {
  Config c;
  c.model.group_query_attention = true;
  c.validate();
  EXPECT_EQ(c.model.kv_heads(), 1);  // Megatron-LM's default --num-query-groups 1
  Config d;
  d.model.group_query_attention = true;
  d.model.num_query_groups = 4;
  d.validate();
  EXPECT_EQ(d.model.kv_heads(), 4);
}

TEST(Config, UnknownDevicePreset) {
  Config c;
  c.cluster.device = "tpu";
  EXPECT_NE(validate_error(c).find("unknown device preset 'tpu'"), std::string::npos);
}

TEST(Config, ParamCountsMatchLlamaShapes) {
  ModelConfig m;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.num_query_groups = 2;
  m.ffn_hidden_size = 128;
  m.vocab_size = 100;
  m.tie_embeddings = false;
  // per layer: 2 norms + q(64x64) + k,v(64x32 each) + o(64x64) + 3 x 64x128
  EXPECT_EQ(m.params_per_layer(), 2 * 64 + 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128);
  EXPECT_EQ(m.params_total(), 2 * m.params_per_layer() + 2 * 100 * 64 + 64);
  m.tie_embeddings = true;
  EXPECT_EQ(m.params_total(), 2 * m.params_per_layer() + 100 * 64 + 64);
}

TEST(Config, LlamaDefaultFfnSize) {
  ModelConfig m;
  m.hidden_size = 4096;
  EXPECT_EQ(m.ffn_size(), 11008);  // Llama-2 7B
}

TEST(Bytes, ParseAndFormat) {
  EXPECT_EQ(parse_bytes("2GiB", "memory-budget"), 2LL << 30);
  EXPECT_EQ(parse_bytes("512MB", "x"), 512000000LL);
  EXPECT_EQ(parse_bytes("80G", "x"), 80LL << 30);
  EXPECT_EQ(parse_bytes("1.5e3", "x"), 1500);
  EXPECT_EQ(parse_bytes("1024", "x"), 1024);
  EXPECT_THROW(parse_bytes("lots", "x"), ConfigError);
  EXPECT_THROW(parse_bytes("3 parsecs", "x"), ConfigError);
  EXPECT_THROW(parse_bytes("-1GiB", "x"), ConfigError);
  EXPECT_EQ(format_bytes(3 << 20), "3.00 MiB");
}

TEST(Strings, NearestWord) {
  std::vector<std::string> keys = {"num-layers", "hidden-size", "seq-length"};
  EXPECT_EQ(nearest_word("num-layer", keys), "num-layers");
  EXPECT_EQ(nearest_word("hiden-size", keys), "hidden-size");
  EXPECT_EQ(nearest_word("completely-different", keys), "");
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);
}

// The full Wagner-Fischer table, to check the banded one against.
int full_edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j)
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
  return d[a.size()][b.size()];
}

TEST(Strings, BoundedEditDistanceIsExactUpToItsLimit) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> len(0, 12), letter(0, 2), lim(0, 8);
  auto word = [&] {
    std::string w(static_cast<size_t>(len(rng)), 'a');
    for (char& c : w) c = static_cast<char>('a' + letter(rng));
    return w;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string a = word(), b = word();
    const int limit = lim(rng), exact = full_edit_distance(a, b);
    EXPECT_EQ(edit_distance(a, b, limit), std::min(exact, limit + 1))
        << a << " " << b << " " << limit;
    EXPECT_EQ(edit_distance(a, b), exact);
  }
  // A hostile key of 100 000 characters costs its band, not its length times every name.
  EXPECT_EQ(edit_distance(std::string(100000, 'x'), "num-layers", 4), 5);
  EXPECT_EQ(nearest_word(std::string(100000, 'x'), {"num-layers"}), "");
}

}  // namespace
}  // namespace infinipipe
