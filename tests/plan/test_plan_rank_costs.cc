// Per pipeline rank costs: a rank whose coefficients are slower gets fewer layers from the
// cost-based split, every plan carries the time terms each rank was timed with, and plans made
// before per-rank costs (no such field) still load.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error_text.h"
#include "plan/plan_costs.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/schedule_memory.h"
#include "plan/stage_layout.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using ::infinipipe::testing::error_text;
using testing::small_config;

// The shared coefficients on every rank, with rank `slow`'s time terms `factor` times larger.
cost::CostModel with_slow_rank(const cost::CostModel& cm, int32_t pp, int32_t slow, double factor) {
  std::vector<cost::Coefficients> ranks(static_cast<size_t>(pp), cm.coefficients());
  cost::Coefficients& c = ranks[static_cast<size_t>(slow)];
  for (double* v : {&c.alpha1, &c.alpha2, &c.beta1, &c.embedding_per_token, &c.lm_head_per_token})
    *v *= factor;
  return cm.with_rank_coefficients(ranks);
}

int64_t layers_of_rank(const std::vector<StageSpec>& stages, int32_t rank) {
  int64_t n = 0;
  for (const StageSpec& s : stages)
    if (s.rank == rank) n += s.num_layers;
  return n;
}

TEST(RankCosts, EqualRankCoefficientsChangeNothing) {
  const Config cfg = small_config(2, 1, 16);
  const auto cm = cost::CostModel::from_config(cfg);
  const auto equal = with_slow_rank(cm, 2, 0, 1.0);
  const auto a = stage_layout_by_cost(cm, 2, 1), b = stage_layout_by_cost(equal, 2, 1);
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s) EXPECT_EQ(a[s].num_layers, b[s].num_layers);
  const std::vector<int64_t> lengths = {4096, 2048, 1024, 512, 300, 200};
  const Plan p = make_plan(cfg, cm, lengths), q = make_plan(cfg, equal, lengths);
  EXPECT_DOUBLE_EQ(p.predicted_step_time, q.predicted_step_time);
  EXPECT_TRUE(p.rank_time_terms.empty());
  EXPECT_EQ(q.rank_time_terms.size(), 2u);
}

TEST(RankCosts, SlowRankGetsFewerLayers) {
  const Config cfg = small_config(2, 1, 16);
  const auto cm = cost::CostModel::from_config(cfg);
  const auto equal = stage_layout_by_cost(cm, 2, 1);
  for (int32_t slow : {0, 1}) {
    SCOPED_TRACE(::testing::Message() << "slow rank " << slow);
    const auto layout = stage_layout_by_cost(with_slow_rank(cm, 2, slow, 3.0), 2, 1);
    EXPECT_LT(layers_of_rank(layout, slow), layers_of_rank(equal, slow));
    EXPECT_EQ(layers_of_rank(layout, 0) + layers_of_rank(layout, 1), 16);
    // The planner, free to split the layers, does the same.
    const Plan p =
        make_plan(cfg, with_slow_rank(cm, 2, slow, 3.0), std::vector<int64_t>{2048, 900});
    EXPECT_LT(layers_of_rank(p.stages, slow), layers_of_rank(equal, slow));
  }
}

TEST(RankCosts, SlowRankActionsArePredictedWithItsOwnTerms) {
  Config cfg = small_config(2, 1, 8);
  cfg.parallel.stage_layers = {4, 4};  // fixed, as the trainer's
  const auto cm = cost::CostModel::from_config(cfg);
  const auto slow = with_slow_rank(cm, 2, 0, 3.0);
  const std::vector<int64_t> lengths = {2048, 1024, 512};
  const Plan p = make_plan(cfg, slow, lengths);
  ASSERT_EQ(p.rank_time_terms.size(), 2u);
  for (int32_t r = 0; r < 2; ++r) {
    for (const Action& a : p.actions[static_cast<size_t>(r)]) {
      if (a.kind != ActionKind::forward) continue;
      const auto sh = p.chunks[static_cast<size_t>(a.chunk)].shapes();
      const cost::StageShape st = stage_shape(p.stages[static_cast<size_t>(a.stage)]);
      EXPECT_EQ(st.rank, r);
      EXPECT_DOUBLE_EQ(a.predicted_time, slow.forward_time(sh, st));
      cost::StageShape shared = st;
      shared.rank = -1;
      if (r == 0) {
        EXPECT_GT(a.predicted_time, 2.0 * cm.forward_time(sh, shared));
      } else {
        EXPECT_DOUBLE_EQ(a.predicted_time, cm.forward_time(sh, shared));
      }
    }
  }
  // The plan's terms rebuild the same per-rank model from the shared one.
  const Plan back = plan_from_json(plan_to_json(p));
  EXPECT_EQ(back.rank_time_terms, p.rank_time_terms);
  const cost::CostModel rebuilt = plan_cost_model(back, cm);
  const auto sh = p.chunks[0].shapes();
  for (int32_t r = 0; r < 2; ++r) {
    const cost::StageShape st = stage_shape(p.stages[static_cast<size_t>(r)]);
    EXPECT_DOUBLE_EQ(rebuilt.backward_time(sh, st), slow.backward_time(sh, st));
    EXPECT_DOUBLE_EQ(rebuilt.recompute_time(sh, 2, r), slow.recompute_time(sh, 2, r));
  }
}

TEST(RankCosts, PlansWithoutRankTermsLoadAndBadTermsAreClearErrors) {
  const Config cfg = small_config(2, 1, 8);
  const auto cm = cost::CostModel::from_config(cfg);
  nlohmann::json j = plan_to_json(make_plan(cfg, cm, std::vector<int64_t>{1024, 512}));
  EXPECT_FALSE(j.contains("rank_time_terms"));  // an older plan's form
  EXPECT_TRUE(plan_from_json(j).rank_time_terms.empty());
  j["rank_time_terms"] = {std::vector<double>(9, 1e-6)};  // one rank of two
  EXPECT_NE(error_text([&] { plan_from_json(j); }).find("rank_time_terms"), std::string::npos);
  j["rank_time_terms"] = {std::vector<double>(9, 1e-6), std::vector<double>(8, 1e-6)};
  EXPECT_NE(error_text([&] { plan_from_json(j); }).find("9 entries"), std::string::npos);
  std::vector<double> negative(9, 1e-6);
  negative[1] = -1;
  j["rank_time_terms"] = {std::vector<double>(9, 1e-6), negative};
  EXPECT_NE(error_text([&] { plan_from_json(j); }).find(">= 0"), std::string::npos);
}

}  // namespace
}  // namespace infinipipe::plan
