// The explain object read back (explain_from_json, what the report reads from traced runs):
// what explain_to_json writes reads back to the same object, and damaged fields are errors
// naming the field.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error_text.h"
#include "core/error.h"
#include "explain_test_util.h"
#include "plan/plan_explain.h"
#include "plan/planner.h"
#include "plan/schedule_table.h"

namespace infinipipe::plan {
namespace {

using nlohmann::json;

json explained(Schedule schedule, int64_t budget) {
  const Config cfg = testing::example_config(budget);
  const auto cm = cost::CostModel::from_config(cfg);
  PlanResult r = make_plan_detailed(cfg, cm, testing::example_lengths(), schedule);
  explain_chosen_plan(r.explain, r.plan, cfg, cm);
  return explain_to_json(r.explain);
}

TEST(PlanExplainJson, ReadsBackWhatItWrites) {
  for (Schedule s : {Schedule::epp, Schedule::interleaved, Schedule::seq1f1b}) {
    SCOPED_TRACE(schedule_name(s));
    const json j = explained(s, s == Schedule::epp ? int64_t{320} << 20 : int64_t{1} << 30);
    ASSERT_FALSE(j.at("candidates").empty());
    EXPECT_EQ(explain_to_json(explain_from_json(j, "explain")), j);
  }
}

std::string error_of(const json& j) {
  return infinipipe::testing::error_text([&] { (void)explain_from_json(j, "plan.json: explain"); });
}

TEST(PlanExplainJson, DamagedFieldsAreErrorsNamingThem) {
  const json good = explained(Schedule::epp, int64_t{320} << 20);
  ASSERT_FALSE(good.at("cuts").empty());
  ASSERT_FALSE(good.at("recompute").empty());

  json j = good;
  j.erase("candidates");
  EXPECT_NE(error_of(j).find("lacks the field \"candidates\""), std::string::npos) << error_of(j);
  j = good;
  j["candidates"][1]["k"] = "four";
  EXPECT_NE(error_of(j).find("plan.json: explain: candidates[1]: k"), std::string::npos)
      << error_of(j);
  j = good;
  j["candidates"][0]["predicted_peak_bytes"][0] = -5;
  EXPECT_NE(error_of(j).find("predicted_peak_bytes[0]"), std::string::npos) << error_of(j);
  j = good;
  j["cuts"][0]["lens"].push_back(7);
  EXPECT_NE(error_of(j).find("one entry per slice"), std::string::npos) << error_of(j);
  j = good;
  j["recompute"][0].erase(6);
  EXPECT_NE(error_of(j).find("recompute[0] must be [stage, chunk"), std::string::npos)
      << error_of(j);
  j = good;
  j["limits"]["time_threshold"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(error_of(j).find("limits: time_threshold"), std::string::npos) << error_of(j);
  EXPECT_NE(error_of(json::array()).find("must be an object"), std::string::npos);
}

}  // namespace
}  // namespace infinipipe::plan
