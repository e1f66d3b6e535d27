#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "plan/planner.h"
#include "plan/stage_layout.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

int64_t total_layers(const std::vector<StageSpec>& v) {
  int64_t n = 0;
  for (const auto& s : v) n += s.num_layers;
  return n;
}

TEST(StageLayout, ByCostGivesTheEmbeddingAndHeadStagesFewerLayers) {
  Config cfg = testing::small_config(4, 1, 32);
  cfg.model.vocab_size = 128000;  // a heavy LM head (Llama-3-like vocabulary on a small model)
  auto cost = cost::CostModel::from_config(cfg);
  auto st = stage_layout_by_cost(cost, 4, 1);
  ASSERT_EQ(st.size(), 4u);
  EXPECT_EQ(total_layers(st), 32);
  EXPECT_LT(st[3].num_layers, st[1].num_layers);
  EXPECT_TRUE(st[0].has_embedding && st[3].has_lm_head);
  EXPECT_FALSE(st[1].has_embedding || st[1].has_lm_head);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(st[s].rank, s);
    EXPECT_GE(st[s].num_layers, 1);
  }
  // No other split has a smaller slowest stage (exhaustive over compositions of 32 into 4).
  std::vector<cost::SliceShape> ref{{0, cfg.model.seq_length, true}};
  auto t = [&](int s, int64_t n) {
    cost::StageShape sh{n, s == 0, s == 3};
    return cost.forward_time(ref, sh) + cost.backward_time(ref, sh);
  };
  double got = 0;
  for (int s = 0; s < 4; ++s) got = std::max(got, t(s, st[s].num_layers));
  double best = 1e300;
  for (int a = 1; a <= 29; ++a)
    for (int b = 1; a + b <= 30; ++b)
      for (int c = 1; a + b + c <= 31; ++c) {
        int d = 32 - a - b - c;
        best = std::min(best, std::max({t(0, a), t(1, b), t(2, c), t(3, d)}));
      }
  EXPECT_DOUBLE_EQ(got, best);
}

// A trainer's model lives on its ranks: plans keep its layout (cfg.parallel.stage_layers)
// whatever the cost model, which alone would split the layers otherwise.
TEST(StageLayout, PlansKeepTheGivenLayout) {
  Config cfg = testing::small_config(4, 1, 32);
  cfg.model.vocab_size = 128000;
  const auto cost = cost::CostModel::from_config(cfg);
  EXPECT_NE(stage_layout_planned(cfg, cost, 4, 1)[3].num_layers, 8);  // by cost
  cfg.parallel.stage_layers = {8, 8, 8, 8};
  const auto st = stage_layout_planned(cfg, cost, 4, 1);
  ASSERT_EQ(st.size(), 4u);
  for (const auto& s : st) EXPECT_EQ(s.num_layers, 8);
  EXPECT_TRUE(st[0].has_embedding && st[3].has_lm_head);
  const Plan p = make_plan(cfg, cost, std::vector<int64_t>{4096, 1000, 500});
  for (const auto& s : p.stages) EXPECT_EQ(s.num_layers, 8);
  cfg.parallel.stage_layers = {8, 8, 16};
  EXPECT_THROW(stage_layout_planned(cfg, cost, 4, 1), ConfigError);
}

TEST(StageLayout, UniformAndForced) {
  auto u = stage_layout_uniform(16, 2, 2);
  ASSERT_EQ(u.size(), 4u);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(u[s].num_layers, 4);
    EXPECT_EQ(u[s].first_layer, 4 * s);
    EXPECT_EQ(u[s].rank, s % 2);
  }
  EXPECT_THROW(stage_layout_uniform(10, 2, 2), ConfigError);  // Megatron: equal virtual stages
  std::vector<int64_t> f{3, 5, 5, 3};
  auto fs = stage_layout_forced(f, 16, 4, 1);
  EXPECT_EQ(fs[2].first_layer, 8);
  EXPECT_THROW(stage_layout_forced(f, 17, 4, 1), ConfigError);
  EXPECT_THROW(stage_layout_forced(f, 16, 2, 1), ConfigError);
  std::vector<int64_t> z{0, 8, 8};
  EXPECT_THROW(stage_layout_forced(z, 16, 3, 1), ConfigError);
  Config cfg = testing::small_config(2, 2, 16);
  auto cost = cost::CostModel::from_config(cfg);
  auto v = stage_layout_by_cost(cost, 2, 2);
  for (const auto& s : v) EXPECT_EQ(s.num_layers, 4);
}

}  // namespace
}  // namespace infinipipe::plan
