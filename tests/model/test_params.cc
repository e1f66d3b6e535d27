#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/tiny_model.h"
#include "core/error.h"
#include "model/params.h"

namespace infinipipe {

namespace {

ModelConfig params_tiny_config() {
  ModelConfig cfg = testing::tiny_model_config(4, 512);
  cfg.tie_embeddings = false;  // the model these tests were written for (Megatron-LM ties)
  cfg.vocab_size = 41;
  return cfg;
}

}  // namespace

TEST(Params, NamesAndShapesFollowHuggingFace) {
  ModelConfig cfg = params_tiny_config();
  MemoryTracker tr;
  ModelParams p(cfg, StageRange::whole(cfg), 7, tr);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ParamRef& r : p.params()) shapes[r.name] = r.shape;
  EXPECT_EQ(shapes.size(), 3u + 9u * 4u);
  EXPECT_EQ(shapes["model.embed_tokens.weight"], (std::vector<int64_t>{41, 32}));
  EXPECT_EQ(shapes["model.layers.3.self_attn.q_proj.weight"], (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(shapes["model.layers.3.self_attn.k_proj.weight"], (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(shapes["model.layers.0.mlp.down_proj.weight"], (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(shapes["model.layers.0.input_layernorm.weight"], (std::vector<int64_t>{32}));
  EXPECT_EQ(shapes["lm_head.weight"], (std::vector<int64_t>{41, 32}));
  EXPECT_EQ(p.numel(), cfg.params_total());
  EXPECT_EQ(tr.current(MemCategory::mem_weights), p.numel() * 4);
  EXPECT_EQ(tr.current(MemCategory::mem_grads), p.numel() * 4);
}

TEST(Params, InitDependsOnlyOnSeedAndName) {
  ModelConfig cfg = params_tiny_config();
  MemoryTracker tr;
  ModelParams whole(cfg, StageRange::whole(cfg), 7, tr);
  ModelParams stage(cfg, {2, 2, false, true}, 7, tr);
  ModelParams other_seed(cfg, {2, 2, false, true}, 8, tr);
  std::map<std::string, ParamRef> by_name;
  for (const ParamRef& r : whole.params()) by_name.emplace(r.name, r);
  auto stage_refs = stage.params();
  auto other_refs = other_seed.params();
  ASSERT_EQ(stage_refs.size(), 2u * 9u + 2u);
  for (size_t i = 0; i < stage_refs.size(); ++i) {
    const ParamRef& s = stage_refs[i];
    const ParamRef& w = by_name.at(s.name);
    ASSERT_EQ(s.numel, w.numel);
    for (int64_t j = 0; j < s.numel; ++j) ASSERT_EQ(s.value[j], w.value[j]) << s.name;
    if (s.shape.size() == 2) {
      EXPECT_NE(s.value[0], other_refs[i].value[0]) << s.name;
    }
  }
}

TEST(Params, MatricesAreNormalAndNormsAreOnes) {
  ModelConfig cfg = params_tiny_config();
  cfg.hidden_size = 256;
  cfg.num_attention_heads = 8;
  cfg.ffn_hidden_size = 512;
  MemoryTracker tr;
  ModelParams p(cfg, {0, 1, false, false}, 3, tr);
  for (const ParamRef& r : p.params()) {
    double s = 0, s2 = 0;
    for (int64_t j = 0; j < r.numel; ++j) {
      s += r.value[j];
      s2 += double(r.value[j]) * r.value[j];
    }
    double mean = s / r.numel, sd = std::sqrt(s2 / r.numel - mean * mean);
    if (r.shape.size() == 1) {
      EXPECT_EQ(mean, 1.0) << r.name;
      EXPECT_EQ(sd, 0.0) << r.name;
    } else {
      // Megatron-LM's scaled init for the projections into the residual stream.
      const bool residual = r.name.find("o_proj") != std::string::npos ||
                            r.name.find("down_proj") != std::string::npos;
      const double want = residual ? 0.02 / std::sqrt(2.0 * cfg.num_layers) : 0.02;
      EXPECT_NEAR(mean, 0.0, 0.002) << r.name;
      EXPECT_NEAR(sd, want, 0.05 * want) << r.name;
    }
  }
  // Different matrices are not copies of each other.
  auto refs = p.params();
  EXPECT_NE(refs[1].value[0], refs[2].value[0]);
}

TEST(Params, TiedHeadUsesTheEmbedding) {
  ModelConfig cfg = params_tiny_config();
  cfg.tie_embeddings = true;
  MemoryTracker tr;
  ModelParams p(cfg, StageRange::whole(cfg), 1, tr);
  EXPECT_EQ(p.lm_head(), p.embedding());
  for (const ParamRef& r : p.params()) EXPECT_NE(r.name, "lm_head.weight");
  EXPECT_EQ(p.numel(), cfg.params_total());
  // A last stage without the embedding holds an identical copy.
  ModelParams last(cfg, {2, 2, false, true}, 1, tr);
  ASSERT_NE(last.lm_head(), nullptr);
  EXPECT_EQ(last.lm_head()->name, "model.embed_tokens.weight");
  for (int64_t j = 0; j < last.lm_head()->value.numel(); ++j) {
    ASSERT_EQ(last.lm_head()->value.data()[j], p.embedding()->value.data()[j]);
  }
}

TEST(Params, BadRangeIsAConfigError) {
  ModelConfig cfg = params_tiny_config();
  MemoryTracker tr;
  EXPECT_THROW(ModelParams(cfg, {3, 2, false, true}, 1, tr), ConfigError);
}

}  // namespace infinipipe
