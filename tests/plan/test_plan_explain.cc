// The planner's explanation (plan_explain.h) on the small example batch under a budget that
// binds: it names the chosen candidate with the plan's own predictions, gives every other one a
// reason, and its cuts, packs and recompute agree with the plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "common/test_temp.h"
#include "explain_test_util.h"
#include "plan/plan_explain.h"
#include "plan/plan_json.h"
#include "plan/planner.h"

namespace infinipipe::plan {
namespace {

using testing::example_config;
using testing::example_lengths;

constexpr int64_t kTightBudget = int64_t{320} << 20;

class PlanExplainTest : public ::testing::Test {
 protected:
  Config cfg = example_config(kTightBudget);
  cost::CostModel cm = cost::CostModel::from_config(cfg);
  std::vector<int64_t> lengths = example_lengths();
  PlanResult r = explained(make_plan_detailed(cfg, cm, lengths, Schedule::epp));

  PlanResult explained(PlanResult res) const {
    explain_chosen_plan(res.explain, res.plan, cfg, cm);
    return res;
  }
};

TEST_F(PlanExplainTest, ChosenCandidateCarriesThePlansOwnPredictions) {
  ASSERT_EQ(lengths.size(), 32u);
  int chosen = 0;
  for (const ExplainCandidate& c : r.explain.candidates) {
    if (!c.chosen) continue;
    ++chosen;
    EXPECT_TRUE(c.fits);
    EXPECT_EQ(c.step_time, r.plan.predicted_step_time);
    EXPECT_EQ(c.peak_bytes, r.plan.predicted_peak_bytes);
    EXPECT_EQ(c.chunks, static_cast<int32_t>(r.plan.chunks.size()));
    EXPECT_EQ(c.pipelines, r.plan.num_pipelines());
    EXPECT_EQ(c.k, r.knobs.slices);
  }
  EXPECT_EQ(chosen, 1);
  EXPECT_EQ(static_cast<int32_t>(r.explain.candidates.size()), r.knobs.candidates + 1)
      << "every setting the search evaluated, plus the winner's exact recompute solve";
}

TEST_F(PlanExplainTest, EveryRejectedCandidateSaysWhy) {
  int over_budget = 0, resolved = 0;
  const double chosen_time = r.plan.predicted_step_time;
  for (const ExplainCandidate& c : r.explain.candidates) {
    SCOPED_TRACE(c.setting);
    const int64_t peak = *std::max_element(c.peak_bytes.begin(), c.peak_bytes.end());
    EXPECT_EQ(c.fits, peak <= kTightBudget);
    if (c.chosen) continue;
    EXPECT_FALSE(c.verdict.empty());
    if (!c.fits) {
      ++over_budget;
      EXPECT_NE(c.verdict.find("over budget by " + format_bytes(peak - kTightBudget)),
                std::string::npos)
          << c.verdict;
    } else if (c.verdict.find("re-solved exactly") != std::string::npos) {
      ++resolved;  // the winner before the exact solve: the same chunks
      EXPECT_EQ(c.chunks, static_cast<int32_t>(r.plan.chunks.size()));
    } else {
      const std::string slower = fmt::format("{:.1f}% slower than the chosen",
                                             100 * (c.step_time - chosen_time) / chosen_time);
      EXPECT_NE(c.verdict.find(slower), std::string::npos) << c.verdict;
    }
  }
  EXPECT_EQ(resolved, 1);
  EXPECT_GE(over_budget, 1) << "the budget binds on this batch";
  EXPECT_NE(explain_text(r.explain).find("over budget by"), std::string::npos);
}

TEST_F(PlanExplainTest, CutsPacksAndRecomputeMatchThePlan) {
  const PlanExplain& ex = r.explain;
  ASSERT_TRUE(ex.has_limits);
  ASSERT_FALSE(ex.cuts.empty()) << "the 8192-token sequence is cut";
  EXPECT_EQ(ex.cuts[0].seq, 0);
  EXPECT_EQ(static_cast<int32_t>(ex.cuts[0].lens.size()), r.knobs.slices);
  for (const ExplainCut& c : ex.cuts) {
    int64_t covered = 0;
    for (size_t i = 0; i < c.lens.size(); ++i) {
      EXPECT_EQ(c.offsets[i], covered);
      covered += c.lens[i];
    }
    EXPECT_EQ(covered, c.length);
  }
  for (int64_t len : ex.cuts[0].lens) EXPECT_LE(len, ex.limits.token_threshold);

  std::map<std::pair<int32_t, int32_t>, int32_t> recomputed;
  for (const auto& list : r.plan.actions)
    for (const Action& a : list)
      if (a.kind == ActionKind::backward && a.recompute_layers > 0)
        recomputed[{a.stage, a.chunk}] = a.recompute_layers;
  ASSERT_EQ(ex.recompute.size(), recomputed.size());
  ASSERT_FALSE(ex.recompute.empty()) << "the tight budget needs recompute";
  for (const ExplainRecompute& e : ex.recompute) {
    EXPECT_EQ(e.layers, (recomputed[{e.stage, e.chunk}]));
    EXPECT_GT(e.saved_bytes, 0);
    EXPECT_GT(e.time, 0);
  }
  EXPECT_EQ(ex.recompute_time, r.knobs.recompute_time);
}

TEST_F(PlanExplainTest, IsDeterministicAndLeavesThePlanAlone) {
  const PlanResult again = explained(make_plan_detailed(cfg, cm, lengths, Schedule::epp));
  EXPECT_EQ(explain_to_json(again.explain).dump(), explain_to_json(r.explain).dump());
  EXPECT_EQ(plan_to_json(again.plan).dump(), plan_to_json(r.plan).dump());
}

TEST_F(PlanExplainTest, PlanWithExplainLoadsAsThePlanWithout) {
  const std::string plain = test::test_temp_path("plain.json").string();
  const std::string with = test::test_temp_path("with.json").string();
  const nlohmann::json why = explain_to_json(r.explain);
  plan_save(r.plan, plain);
  plan_save(r.plan, with, &why);
  std::ifstream in(with);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str());
  ASSERT_TRUE(j.contains("explain"));
  EXPECT_EQ(j["explain"], why);
  j.erase("explain");
  std::ifstream in_plain(plain);
  std::stringstream plain_text;
  plain_text << in_plain.rdbuf();
  EXPECT_EQ(j.dump(1) + "\n", plain_text.str()) << "explain is the only added field";
  EXPECT_EQ(plan_to_json(plan_load(with)).dump(), plan_to_json(r.plan).dump());
  std::filesystem::remove(plain);
  std::filesystem::remove(with);
}

TEST(PlanExplain, BaselineSchedulesExplainTheirChosenPlan) {
  const Config cfg = example_config(int64_t{2} << 30);
  const auto cm = cost::CostModel::from_config(cfg);
  PlanResult r = make_plan_detailed(cfg, cm, example_lengths(), Schedule::one_f_one_b);
  explain_chosen_plan(r.explain, r.plan, cfg, cm);
  EXPECT_EQ(static_cast<int32_t>(r.explain.candidates.size()), r.knobs.candidates);
  EXPECT_EQ(std::count_if(r.explain.candidates.begin(), r.explain.candidates.end(),
                          [](const ExplainCandidate& c) { return c.chosen; }),
            1);
  EXPECT_TRUE(r.explain.cuts.empty()) << "batch-level schedules never cut";
  size_t whole = 0;
  for (const ExplainPack& p : r.explain.packs) whole += p.seqs.size();
  EXPECT_EQ(whole, r.plan.seq_lengths.size());
  EXPECT_EQ(r.explain.schedule, "1f1b");
  EXPECT_NE(explain_text(r.explain).find("-> chosen"), std::string::npos);
}

}  // namespace
}  // namespace infinipipe::plan
