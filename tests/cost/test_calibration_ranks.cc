// The per-rank section of calibration files: every rank's terms survive a save and load, a run
// takes them by the documented rule (own entry, stage mean over replicas, or none), files
// without the section load as before, and damaged sections are errors naming the field.
#include "cost/calibration_ranks.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cost/online_fit.h"
#include "cost/small_calibration.h"

namespace infinipipe::cost {
namespace {

// A pp 2 × dp 2 file whose ranks differ: alpha2 and the tail grow with the world rank.
Calibration two_by_two() {
  Calibration c = testing::small_calibration();
  c.pipeline_parallel = 2;
  c.data_parallel = 2;
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t d = 0; d < 2; ++d) {
      CalibrationRank r{s, d, c.coeffs};
      const double w = static_cast<double>(s * 2 + d + 1);
      r.coeffs.alpha2 = c.coeffs.alpha2 * (1 + 0.25 * w);
      r.coeffs.beta1 = 1e-4 * w;
      r.coeffs.action_gap_s = 1e-3 * w;
      r.coeffs.step_tail_s = 0.05 * w;
      c.ranks.push_back(r);
    }
  return c;
}

std::array<double, kNumOnlineTerms> terms(const Coefficients& c) {
  return online_terms_get(c);
}

TEST(CalibrationRanks, RoundTripKeepsEveryRank) {
  const Calibration a = two_by_two();
  const Calibration b = calibration_from_json(calibration_to_json(a), "test");
  EXPECT_EQ(b.pipeline_parallel, 2);
  EXPECT_EQ(b.data_parallel, 2);
  ASSERT_EQ(b.ranks.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(b.ranks[i].stage, a.ranks[i].stage);
    EXPECT_EQ(b.ranks[i].replica, a.ranks[i].replica);
    EXPECT_EQ(terms(b.ranks[i].coeffs), terms(a.ranks[i].coeffs)) << "rank " << i;
    EXPECT_EQ(b.ranks[i].coeffs.action_gap_s, a.ranks[i].coeffs.action_gap_s);
    EXPECT_EQ(b.ranks[i].coeffs.step_tail_s, a.ranks[i].coeffs.step_tail_s);
    // Links and memory are the file's shared ones.
    EXPECT_EQ(b.ranks[i].coeffs.act_bytes_per_token_layer, a.coeffs.act_bytes_per_token_layer);
  }
}

TEST(CalibrationRanks, FilesWithoutRanksLoadAndGiveNone) {
  Calibration a = two_by_two();
  a.ranks.clear();
  a.pipeline_parallel = a.data_parallel = 0;
  const std::string text = calibration_to_json(a);
  EXPECT_EQ(nlohmann::json::parse(text).count("ranks"), 0u);
  const Calibration b = calibration_from_json(text, "test");
  EXPECT_TRUE(b.ranks.empty());
  EXPECT_TRUE(calibration_rank_coefficients(b, b.coeffs, 2, 2, 0).empty());
}

TEST(CalibrationRanks, TheSameLayoutGivesEachRankItsOwnTerms) {
  const Calibration c = two_by_two();
  Coefficients base = c.coeffs;
  base.act_bytes_per_token_layer = 777;  // the run's own memory terms stay
  for (int64_t d = 0; d < 2; ++d) {
    const std::vector<Coefficients> got = calibration_rank_coefficients(c, base, 2, 2, d);
    ASSERT_EQ(got.size(), 2u);
    for (int64_t s = 0; s < 2; ++s) {
      const Coefficients& want = c.ranks[static_cast<size_t>(s * 2 + d)].coeffs;
      EXPECT_EQ(terms(got[static_cast<size_t>(s)]), terms(want));
      EXPECT_EQ(got[static_cast<size_t>(s)].step_tail_s, want.step_tail_s);
      EXPECT_EQ(got[static_cast<size_t>(s)].act_bytes_per_token_layer, 777);
    }
  }
}

TEST(CalibrationRanks, AnotherDpGivesEachStageItsMeanOverTheReplicas) {
  const Calibration c = two_by_two();
  for (int64_t dp : {1, 4}) {
    const std::vector<Coefficients> got = calibration_rank_coefficients(c, c.coeffs, 2, dp, 0);
    ASSERT_EQ(got.size(), 2u);
    for (size_t s = 0; s < 2; ++s) {
      const Coefficients &x = c.ranks[s * 2].coeffs, &y = c.ranks[s * 2 + 1].coeffs;
      EXPECT_DOUBLE_EQ(got[s].alpha2, 0.5 * (x.alpha2 + y.alpha2)) << "dp " << dp;
      EXPECT_DOUBLE_EQ(got[s].beta1, 0.5 * (x.beta1 + y.beta1));
      EXPECT_DOUBLE_EQ(got[s].action_gap_s, 0.5 * (x.action_gap_s + y.action_gap_s));
      EXPECT_DOUBLE_EQ(got[s].step_tail_s, 0.5 * (x.step_tail_s + y.step_tail_s));
    }
  }
}

TEST(CalibrationRanks, AnotherPpGivesNone) {
  const Calibration c = two_by_two();
  EXPECT_TRUE(calibration_rank_coefficients(c, c.coeffs, 4, 1, 0).empty());
  EXPECT_TRUE(calibration_rank_coefficients(c, c.coeffs, 1, 4, 0).empty());
}

// Each edit of a good file, and the words its error must contain.
TEST(CalibrationRanks, DamagedSectionsAreNamedErrors) {
  const nlohmann::json good = nlohmann::json::parse(calibration_to_json(two_by_two()));
  struct Case {
    const char* what;
    void (*edit)(nlohmann::json&);
    const char* says;
  };
  const Case cases[] = {
      {"not an object", [](nlohmann::json& j) { j["ranks"] = 3; }, "ranks must be an object"},
      {"pp 0", [](nlohmann::json& j) { j["ranks"]["pipeline_parallel"] = 0; },
       "ranks.pipeline_parallel"},
      {"an entry missing", [](nlohmann::json& j) { j["ranks"]["entries"].erase(3); },
       "one entry per rank of pp 2 x dp 2"},
      {"a repeated rank", [](nlohmann::json& j) { j["ranks"]["entries"][1]["replica"] = 0; },
       "appears twice"},
      {"stage beyond pp", [](nlohmann::json& j) { j["ranks"]["entries"][0]["stage"] = 2; },
       "entries[0].stage"},
      {"a negative term",
       [](nlohmann::json& j) { j["ranks"]["entries"][2]["time_terms"]["alpha2"] = -1.0; },
       "entries[2].time_terms.alpha2"},
      {"a zero backward factor",
       [](nlohmann::json& j) { j["ranks"]["entries"][2]["time_terms"]["backward_factor"] = 0.0; },
       "backward_factor must be > 0"},
      {"a term missing",
       [](nlohmann::json& j) { j["ranks"]["entries"][1]["time_terms"].erase("beta1"); }, "beta1"},
      {"a tail of a day",
       [](nlohmann::json& j) { j["ranks"]["entries"][0]["step_tail_s"] = 86400; },
       "entries[0].step_tail_s"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = good;
    c.edit(j);
    try {
      calibration_from_json(j.dump(), "'cal.json'");
      ADD_FAILURE() << c.what << ": loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos)
          << c.what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("'cal.json'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace infinipipe::cost
