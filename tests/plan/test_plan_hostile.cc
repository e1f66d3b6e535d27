// Hostile plan files and extreme model sizes: clear Errors, no wrapped arithmetic, no slow
// searches.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "core/error.h"
#include "core/json_read.h"
#include "plan/plan_json.h"
#include "plan/schedule.h"
#include "plan/stage_layout.h"
#include "plan/validate.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

nlohmann::json sample_plan_json() {
  Config cfg = testing::small_config(2);
  std::mt19937 rng(5);
  Plan plan = testing::plan_random(cfg, rng, 6);
  schedule_epp(plan);
  plan_predict(plan, cost::CostModel::from_config(cfg), cfg);
  return plan_to_json(plan);
}

std::string load_error(const nlohmann::json& j) {
  try {
    plan_from_json(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PlanHostile, SliceRangesCannotOverflow) {
  nlohmann::json j = sample_plan_json();
  ASSERT_EQ(load_error(j), "");
  j["chunks"][0]["slices"][0][1] = INT64_MAX;  // offset + len once wrapped negative
  EXPECT_NE(load_error(j).find("offset = 9223372036854775807 is outside"), std::string::npos)
      << load_error(j);
  j = sample_plan_json();
  j["seq_lengths"][0] = uint64_t{18446744073709551615u};
  EXPECT_NE(load_error(j).find("seq_lengths[0] must be an integer"), std::string::npos)
      << load_error(j);
  j = sample_plan_json();
  j["stages"][0]["num_layers"] = 2.5;
  EXPECT_NE(load_error(j).find("stages[0].num_layers must be an integer"), std::string::npos)
      << load_error(j);
  j = sample_plan_json();
  j["memory_budget"] = -1;
  EXPECT_NE(load_error(j).find("memory_budget = -1 is outside"), std::string::npos);
}

TEST(PlanHostile, NestedValuesInErrorsAreShownBriefly) {
  nlohmann::json j = sample_plan_json();
  j["format"] = json_parse(std::string(60, '[') + std::string(60, ']'), "x");
  const std::string e = load_error(j);
  EXPECT_NE(e.find("\"format\" is array of 1 entries"), std::string::npos) << e;
}

TEST(PlanHostile, CostLayerSplitOfManyLayersIsQuick) {
  Config cfg = testing::small_config(8, 1, 1 << 16);
  const auto cost = cost::CostModel::from_config(cfg);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<StageSpec> st = stage_layout_by_cost(cost, 8, 1);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t total = 0;
  for (const StageSpec& s : st) total += s.num_layers;
  EXPECT_EQ(total, 1 << 16);
  EXPECT_LT(seconds, 5.0);
}

}  // namespace
}  // namespace infinipipe::plan
