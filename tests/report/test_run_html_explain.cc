// The report page's "Why these plans" section (run_html_explain.h) for real planner
// explanations: every candidate with its verdict and the chosen one marked, the cuts, packs and
// recompute of the chosen plan, long lists folded, text escaped, one plan shown at a time.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include <fmt/format.h>

#include "common/build_paths.h"
#include "common/text_count.h"
#include "plan/planner.h"
#include "plan/test_plan_util.h"
#include "report/run_html_explain.h"
#include "report/svg_util.h"

namespace infinipipe::report {
namespace {

using testing::text_count;

std::vector<int64_t> example_lengths() {
  std::ifstream in(std::string(INFINIPIPE_SOURCE_DIR) + "/examples/lengths-small.txt");
  std::vector<int64_t> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') out.push_back(std::stoll(line));
  return out;
}

plan::PlanExplain explained(Schedule schedule, int64_t budget) {
  Config cfg = plan::testing::small_config(2);
  cfg.model.vocab_size = 257;
  cfg.parallel.min_tail_slice = 512;
  cfg.parallel.recompute_granularity = RecomputeGranularity::adaptive;
  cfg.training.memory_budget = budget;
  const auto cm = cost::CostModel::from_config(cfg);
  plan::PlanResult r = plan::make_plan_detailed(cfg, cm, example_lengths(), schedule);
  plan::explain_chosen_plan(r.explain, r.plan, cfg, cm);
  return r.explain;
}

TEST(RunHtmlExplain, ShowsEveryCandidateAndTheChosenPlansCutsPacksAndRecompute) {
  const plan::PlanExplain ex = explained(Schedule::epp, int64_t{320} << 20);
  const std::string h = html_explain({{{3, 0}, ex}}, 3);
  EXPECT_NE(h.find("<h3>Iteration 3, replica 0 (epp schedule)</h3>"), std::string::npos);
  EXPECT_EQ(text_count(h, "<tr class=\"chosen\">"), 1);
  for (const plan::ExplainCandidate& c : ex.candidates) {
    EXPECT_NE(h.find(svg_escape(c.verdict)), std::string::npos) << c.verdict;
    if (c.chosen) {
      EXPECT_NE(h.find("<tr class=\"chosen\"><td>&#9733;</td><td class=\"text\">" +
                       svg_escape(c.setting)),
                std::string::npos);
    }
  }
  for (const std::string& n : ex.notes) EXPECT_NE(h.find(svg_escape(n)), std::string::npos) << n;
  ASSERT_FALSE(ex.cuts.empty());
  EXPECT_NE(h.find(fmt::format("T_m = {} tokens", ex.limits.token_threshold)), std::string::npos);
  EXPECT_NE(h.find(fmt::format("[{}, +{})", ex.cuts[0].offsets[1], ex.cuts[0].lens[1])),
            std::string::npos);
  ASSERT_GT(ex.recompute.size(), 16u) << "this batch recomputes many (stage, chunk)";
  EXPECT_NE(h.find(fmt::format("<details><summary>{} recomputing (stage, chunk)</summary>",
                               ex.recompute.size())),
            std::string::npos);
  EXPECT_NE(h.find(fmt::format("{}/{}</td>", ex.recompute[0].layers, ex.recompute[0].max_layers)),
            std::string::npos);
  EXPECT_EQ(h.find("<select"), std::string::npos) << "one plan needs no selector";
}

TEST(RunHtmlExplain, BaselineSettingsAreEscapedAndOnePlanIsShownAtATime) {
  const plan::PlanExplain epp = explained(Schedule::epp, int64_t{1} << 30);
  const plan::PlanExplain gpipe = explained(Schedule::gpipe, int64_t{1} << 30);
  const std::string h = html_explain({{{1, 0}, epp}, {{2, 0}, gpipe}, {{2, 1}, gpipe}}, 2);
  EXPECT_EQ(text_count(h, "<div class=\"explain-plan\""), 3);
  EXPECT_EQ(text_count(h, "style=\"display:none\""), 2);
  EXPECT_NE(h.find("<option value=\"2-0\" selected>iteration 2, replica 0</option>"),
            std::string::npos);
  EXPECT_NE(h.find("<script>"), std::string::npos);
  EXPECT_NE(h.find("(gpipe schedule)"), std::string::npos);
  EXPECT_NE(h.find("mb&lt;="), std::string::npos) << "the micro-batch capacity, escaped";
  EXPECT_EQ(h.find("mb<="), std::string::npos);
  EXPECT_NE(h.find(svg_escape(gpipe.pack_rule)), std::string::npos);
}

TEST(RunHtmlExplain, WithoutExplanationsSaysHowToRecordThem) {
  const std::string h = html_explain({}, 1);
  EXPECT_NE(h.find("train --trace DIR --trace-explain"), std::string::npos);
  EXPECT_EQ(h.find("<table>"), std::string::npos);
}

}  // namespace
}  // namespace infinipipe::report
