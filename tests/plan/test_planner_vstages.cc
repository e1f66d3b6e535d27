// The EPP planner on virtual stages: with --vpp V it searches vpp 1 and every v <= V with equal
// layers per virtual stage and keeps the fastest plan that fits; epp_exact_vpp (the layout
// search's) and a forced layer split (the trainer's) fix vpp, to the same plan; every plan it
// returns validates, slices and recompute included.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "common/least_budget.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/stage_layout.h"
#include "plan/validate.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using testing::small_config;

std::vector<int64_t> vstage_long_tail(std::mt19937& rng, int n, int64_t max_len) {
  std::lognormal_distribution<double> body(6.0, 1.0);
  std::bernoulli_distribution is_long(0.1);
  std::uniform_int_distribution<int64_t> tail(max_len / 2, max_len);
  std::vector<int64_t> out(n);
  for (auto& l : out)
    l = is_long(rng) ? tail(rng) : std::clamp<int64_t>(static_cast<int64_t>(body(rng)), 1, max_len);
  out[0] = max_len;
  return out;
}

Config vstage_config(int32_t pp, int32_t vpp) {
  Config cfg = small_config(pp, 1, 16);
  cfg.model.seq_length = 16384;
  cfg.parallel.schedule = Schedule::epp;
  cfg.parallel.virtual_stages = vpp;
  cfg.parallel.recompute_granularity = RecomputeGranularity::adaptive;
  return cfg;
}

int64_t max_peak(const Plan& p) {
  return *std::max_element(p.predicted_peak_bytes.begin(), p.predicted_peak_bytes.end());
}

// Allowing virtual stages never makes the plan slower (the vpp-1 search is one of its passes),
// the knobs say the vpp the plan has, and every candidate setting of every vpp is listed.
TEST(PlannerVstages, AllowingVirtualStagesNeverSlowsThePlan) {
  std::mt19937 rng(5);
  for (int32_t pp : {2, 4})
    for (int trial = 0; trial < 3; ++trial) {
      const auto lengths = vstage_long_tail(rng, 16 + 8 * trial, 16384);
      const Config flat = vstage_config(pp, 1), allowed = vstage_config(pp, 4);
      const auto cm = cost::CostModel::from_config(flat);
      const PlanResult a = make_plan_detailed(flat, cm, lengths, Schedule::epp);
      const PlanResult b = make_plan_detailed(allowed, cm, lengths, Schedule::epp);
      SCOPED_TRACE(::testing::Message() << "pp " << pp << " trial " << trial);
      EXPECT_EQ(a.plan.vpp, 1);
      EXPECT_LE(b.plan.predicted_step_time, a.plan.predicted_step_time * (1 + 1e-12));
      EXPECT_EQ(b.knobs.vpp, b.plan.vpp);
      EXPECT_EQ(b.plan.num_stages(), pp * b.plan.vpp);
      EXPECT_TRUE(validate(b.plan, cm, allowed).ok()) << validate(b.plan, cm, allowed).message();
      bool saw_vpp2 = false, saw_vpp4 = false;
      for (const ExplainCandidate& c : b.explain.candidates) {
        saw_vpp2 = saw_vpp2 || c.setting.rfind("vpp=2, ", 0) == 0;
        saw_vpp4 = saw_vpp4 || c.setting.rfind("vpp=4, ", 0) == 0;
      }
      EXPECT_TRUE(saw_vpp2 && saw_vpp4);
      if (b.plan.vpp > 1) {
        EXPECT_NE(b.knobs.describe().find(fmt::format("vpp={}", b.plan.vpp)), std::string::npos);
      }
    }
}

// epp_exact_vpp plans vpp V alone, and that plan is the trainer's on the model it builds for V
// (stage_layers from the same split): what the layout search ranks is what train runs.
TEST(PlannerVstages, ExactVppIsTheTrainersPlanOnThatLayout) {
  std::mt19937 rng(7);
  for (int32_t pp : {2, 4})
    for (int32_t v : {1, 2, 4}) {
      Config exact = vstage_config(pp, v);
      exact.parallel.epp_exact_vpp = true;
      const auto cm = cost::CostModel::from_config(exact);
      const auto lengths = vstage_long_tail(rng, 24, 16384);
      const PlanResult a = make_plan_detailed(exact, cm, lengths, Schedule::epp);
      SCOPED_TRACE(::testing::Message() << "pp " << pp << " vpp " << v);
      EXPECT_EQ(a.plan.vpp, v);
      EXPECT_EQ(a.knobs.vpp, v);
      for (const ExplainCandidate& c : a.explain.candidates)
        EXPECT_EQ(c.setting.rfind("vpp=", 0) == 0, v > 1) << c.setting;
      Config trained = vstage_config(pp, v);
      for (const StageSpec& st : stage_layout_by_cost(cm, pp, v))
        trained.parallel.stage_layers.push_back(st.num_layers);
      const PlanResult b = make_plan_detailed(trained, cm, lengths, Schedule::epp);
      EXPECT_EQ(plan_to_json(a.plan).dump(), plan_to_json(b.plan).dump());
    }
}

// The trainer builds its model once: a forced split of pp * 2 stages makes every batch an EPP
// plan on 2 virtual stages, sliced and recomputing under a tight budget, valid throughout.
TEST(PlannerVstages, ForcedLayoutFixesVppAndTightBudgetsSliceAndRecompute) {
  std::mt19937 rng(9);
  for (int32_t pp : {2, 4}) {
    Config cfg = vstage_config(pp, 2);
    cfg.parallel.stage_layers.assign(size_t(pp) * 2, 16 / (pp * 2));
    const auto cm = cost::CostModel::from_config(cfg);
    const auto lengths = vstage_long_tail(rng, 32, 16384);
    const PlanResult roomy = make_plan_detailed(cfg, cm, lengths, Schedule::epp);
    ASSERT_EQ(roomy.plan.vpp, 2);
    // A budget a quarter of the way from the least that fits to the roomy plan's peak.
    const int64_t least = ::infinipipe::testing::least_budget(cfg, cm, lengths);
    ASSERT_GT(least, 0);
    cfg.training.memory_budget = least + (max_peak(roomy.plan) - least) / 4;
    const PlanResult tight = make_plan_detailed(cfg, cm, lengths, Schedule::epp);
    EXPECT_EQ(tight.plan.vpp, 2);
    EXPECT_TRUE(validate(tight.plan, cm, cfg).ok()) << validate(tight.plan, cm, cfg).message();
    EXPECT_LE(max_peak(tight.plan), cfg.training.memory_budget);
    int64_t split = 0, recompute = 0;
    for (const Chunk& c : tight.plan.chunks) split += c.kind() == ChunkKind::split;
    for (const auto& list : tight.plan.actions)
      for (const Action& a : list) recompute += a.recompute_layers > 0;
    EXPECT_GT(split, 0) << "pp " << pp;
    EXPECT_GT(recompute, 0) << "pp " << pp;
  }
}

}  // namespace
}  // namespace infinipipe::plan
