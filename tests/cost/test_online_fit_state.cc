// An online fit's saved state: read back it continues the very same recursion (bit for bit),
// and a damaged or hostile state (NaN, negative, wrong sizes, asymmetric) is refused clearly.
#include "cost/online_fit_state.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/error.h"
#include "cost/fit_test_model.h"

namespace infinipipe::cost {
namespace {

// Forwards and backwards of packed and sliced chunks on a first and a last stage, with times
// 1.7x what the prior predicts, so the fit moves.
ActionSample sample(const CostModel& cm, int i) {
  ActionSample s;
  s.chunk = {{0, 200 + 37 * (i % 5), true}, {0, 64, true}};
  if (i % 3 == 0) s.chunk = {{512, 300, false}};
  s.stage = {4, i % 2 == 0, i % 2 == 1, -1};
  s.backward = i % 2 == 1;
  s.recompute_layers = s.backward ? i % 3 : 0;
  const double t = s.backward ? cm.backward_time(s.chunk, s.stage) +
                                    cm.recompute_time(s.chunk, s.recompute_layers)
                              : cm.forward_time(s.chunk, s.stage);
  s.seconds = 1.7 * t * (1.0 + 0.05 * ((i * 7) % 3 - 1));
  return s;
}

nlohmann::json trained_state_json(OnlineFit& fit, int samples) {
  for (int i = 0; i < samples; ++i) fit.update(sample(fit.prior(), i));
  // Through text, as a checkpoint holds it.
  return nlohmann::json::parse(online_fit_state_to_json(fit.state()).dump());
}

TEST(OnlineFitState, RestoredFitContinuesBitForBit) {
  const CostModel cm = fit_test_prior(4096);
  OnlineFit saving(cm);
  const nlohmann::json j = trained_state_json(saving, 40);
  OnlineFit resumed(cm);
  resumed.restore(online_fit_state_from_json(j, "test"), "test");
  for (int t = 0; t < kNumOnlineTerms; ++t) {
    ASSERT_EQ(resumed.term(OnlineTerm(t)), saving.term(OnlineTerm(t)))
        << online_term_name(OnlineTerm(t));
  }
  ASSERT_NE(saving.term(OnlineTerm::alpha2), cm.coefficients().alpha2) << "the fit never moved";
  // Both go on learning from the same measurements: the same terms, bit for bit.
  for (int i = 40; i < 80; ++i) {
    saving.update(sample(cm, i));
    resumed.update(sample(cm, i));
  }
  for (int t = 0; t < kNumOnlineTerms; ++t) {
    EXPECT_EQ(resumed.term(OnlineTerm(t)), saving.term(OnlineTerm(t)))
        << online_term_name(OnlineTerm(t));
  }
  EXPECT_EQ(resumed.residual(true), saving.residual(true));
  EXPECT_EQ(resumed.num_samples(false), saving.num_samples(false));
}

// The error for the damaged state, which must name `needle`.
std::string refusal(const nlohmann::json& j) {
  OnlineFit fit(fit_test_prior(4096));
  try {
    fit.restore(online_fit_state_from_json(j, "ckpt/cost-fit.json"), "ckpt/cost-fit.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OnlineFitState, HostileStatesAreRefused) {
  OnlineFit fit(fit_test_prior(4096));
  const nlohmann::json good = trained_state_json(fit, 20);
  ASSERT_EQ(refusal(good), "");
  const auto damaged = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    return refusal(nlohmann::json::parse(j.dump()));
  };
  // A NaN is written as null in JSON.
  EXPECT_NE(damaged([](auto& j) {
              j["value"][1] = std::numeric_limits<double>::quiet_NaN();
            }).find("value[1]"),
            std::string::npos);
  EXPECT_NE(damaged([](auto& j) { j["value"][0] = -1.0; }).find("alpha1"), std::string::npos);
  EXPECT_NE(damaged([](auto& j) { j["scale"].erase(0); }).find("scale must be an array of 9"),
            std::string::npos);
  EXPECT_NE(damaged([](auto& j) { j["covariance"][2][3] = 1e3; }).find("symmetric"),
            std::string::npos);
  EXPECT_NE(damaged([](auto& j) { j["covariance"][4][4] = -0.5; }).find("variance"),
            std::string::npos);
  EXPECT_NE(damaged([](auto& j) { j["term_samples"][2] = 1 << 30; }).find("beta1"),
            std::string::npos);
  EXPECT_NE(damaged([](auto& j) { j["samples"][0] = -3; }).find("samples[0]"), std::string::npos);
  EXPECT_NE(damaged([](auto& j) {
              j["residual_sq"][1] = std::numeric_limits<double>::infinity();
            }).find("residual_sq"),
            std::string::npos);
  EXPECT_NE(damaged([](auto& j) { j["terms"][0] = "alpha9"; }).find("terms[0]"), std::string::npos);
  EXPECT_NE(damaged([](auto& j) { j = nlohmann::json::array(); }).find("must be an object"),
            std::string::npos);
}

// Found by the cost_fit_json fuzz target's oracles: states whose every number was finite and
// >= 0, yet no fit reaches them, made a fit that predicts infinite or NaN times, or writes a
// calibration file that does not load (and plans with terms Clp refuses).
TEST(OnlineFitState, StatesNoFitReachesAreRefused) {
  OnlineFit fit(fit_test_prior(4096));
  const nlohmann::json good = trained_state_json(fit, 20);
  const auto damaged = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = good;
    edit(j);
    return refusal(nlohmann::json::parse(j.dump()));
  };
  const std::string big = damaged([](auto& j) { j["value"][0] = 100.0; });
  EXPECT_NE(big.find("term alpha1 has value 100"), std::string::npos) << big;
  EXPECT_NE(big.find("at most 60"), std::string::npos) << big;
  EXPECT_NE(damaged([](auto& j) { j["scale"][1] = 1e300; }).find("term alpha2"), std::string::npos);
  EXPECT_NE(damaged([](auto& j) { j["value"][4] = 0.0; }).find("value > 0"), std::string::npos);
  EXPECT_NE(damaged([](auto& j) { j["covariance"][0][0] = 1e300; }).find("at most the prior's, 10"),
            std::string::npos);
  // Symmetric, every variance within the prior's, yet |cov01| > sqrt(cov00 cov11).
  const std::string indefinite = damaged([](auto& j) {
    j["covariance"][0][0] = 1.0;
    j["covariance"][1][1] = 1.0;
    j["covariance"][0][1] = 1.5;
    j["covariance"][1][0] = 1.5;
  });
  EXPECT_NE(indefinite.find("not positive semi-definite"), std::string::npos) << indefinite;
}

TEST(OnlineFitState, TermListsAreCheckedForSizeAndSign) {
  std::array<double, kNumOnlineTerms> out{};
  EXPECT_THROW(json_terms_read(nlohmann::json::array({1.0, 2.0}), "t", out), Error);
  nlohmann::json j = nlohmann::json::array();
  for (int i = 0; i < kNumOnlineTerms; ++i) j.push_back(i == 3 ? -1.0 : 1.0);
  EXPECT_THROW(json_terms_read(j, "t", out), Error);
  j[3] = 0.5;
  json_terms_read(j, "t", out);
  EXPECT_EQ(out[3], 0.5);
  // Beyond a calibration's range (seconds per token pair at most 60; backward factor > 0).
  j[0] = 1e20;
  EXPECT_THROW(json_terms_read(j, "t", out), Error);
  try {
    json_terms_read(j, "pooled.terms", out);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pooled.terms[0] (alpha1)"), std::string::npos)
        << e.what();
  }
  j[0] = 1.0;
  j[4] = 0.0;
  EXPECT_THROW(json_terms_read(j, "t", out), Error);
}

}  // namespace
}  // namespace infinipipe::cost
