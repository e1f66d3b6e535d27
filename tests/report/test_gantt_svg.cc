#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/test_temp.h"
#include "common/text_count.h"
#include "core/error.h"
#include "plan/schedule.h"
#include "plan/test_plan_util.h"
#include "plan/validate.h"
#include "report/gantt_svg.h"
#include "report_test_plan.h"
#include "sim/simulator.h"

namespace infinipipe::report {
namespace {

using testing::text_count;

class Gantt : public ::testing::Test {
 protected:
  Config cfg = plan::testing::small_config(4);
  cost::CostModel cost = cost::CostModel::from_config(cfg);
  plan::Plan p = testing::report_test_plan(cfg, cost, 2);
  void SetUp() override { p.memory_budget = p.predicted_peak_bytes[0] + (1 << 20); }
};

TEST_F(Gantt, DrawsEveryActionRecomputeAndMemory) {
  sim::StepResult r = sim::simulate(p, cost, cfg);
  std::string svg = gantt_svg(r);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  int actions = 0;
  for (const auto& list : p.actions) actions += static_cast<int>(list.size());
  EXPECT_EQ(text_count(svg, "<title>"), actions);
  EXPECT_EQ(text_count(svg, "<title>backward chunk"), actions / 2);
  // Chunk 1's backward on each of the 4 ranks carries a hatched recompute part.
  EXPECT_EQ(text_count(svg, "fill=\"url(#recompute)\"/>\n"), 4);
  EXPECT_EQ(text_count(svg, ", recompute 2 layers"), 4);
  EXPECT_EQ(text_count(svg, "<polyline"), 4);         // one memory curve per rank
  EXPECT_EQ(text_count(svg, "stroke-dasharray"), 4);  // the budget line in each panel
  EXPECT_EQ(text_count(svg, "<text"), text_count(svg, "</text>"));
  EXPECT_EQ(text_count(svg, "<title>"), text_count(svg, "</title>"));
  // Same chunk, same hue: forward light, backward dark.
  EXPECT_NE(svg.find("hsl(138,65%,72%)"), std::string::npos);  // chunk 1 forward
  EXPECT_NE(svg.find("hsl(138,65%,36%)"), std::string::npos);  // chunk 1 backward
}

TEST_F(Gantt, SavesAFile) {
  sim::StepResult r = sim::simulate(p, cost, cfg);
  const std::string path = test::test_temp_path("gantt.svg").string();
  gantt_svg_save(r, path, {.title = "a <test> & more"});
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("a &lt;test&gt; &amp; more"), std::string::npos);
  std::filesystem::remove(path);
  EXPECT_THROW(gantt_svg_save(r, "/nonexistent-dir/x.svg"), Error);
}

}  // namespace
}  // namespace infinipipe::report
