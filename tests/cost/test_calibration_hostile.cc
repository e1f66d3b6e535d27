// Hostile calibration files: every coefficient is checked before it reaches a solver.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "cost/calibration.h"

namespace infinipipe::cost {
namespace {

std::string good_text() {
  Calibration c;
  c.model.num_layers = 4;
  c.model.hidden_size = 256;
  c.model.num_attention_heads = 4;
  c.model.seq_length = 4096;
  c.device = device_preset("cpu", false);
  c.coeffs = CostModel::derive_coefficients(c.model, c.device, 1, false);
  return calibration_to_json(c);
}

std::string error_of(const std::string& text) {
  try {
    calibration_from_json(text, "cal.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string with(const char* section, const char* key, const nlohmann::json& v) {
  nlohmann::json j = nlohmann::json::parse(good_text());
  j[section][key] = v;
  return error_of(j.dump());
}

TEST(CalibrationHostile, CoefficientsMustBePhysical) {
  ASSERT_EQ(error_of(good_text()), "");
  EXPECT_NE(with("coefficients", "alpha1", 1e20).find("coefficients.alpha1 = 1e+20 must be"),
            std::string::npos);
  EXPECT_NE(with("coefficients", "p2p_bandwidth_intra", 1e30).find("at most 1e+15"),
            std::string::npos);
  EXPECT_NE(with("coefficients", "act_bytes_per_token_layer", 1e13).find("at most 1e+12"),
            std::string::npos);
  EXPECT_NE(with("coefficients", "recompute_factor", -1).find("must be >= 0"), std::string::npos);
  EXPECT_NE(with("device", "peak_flops", 1e30).find("device.peak_flops"), std::string::npos);
}

TEST(CalibrationHostile, IntegersAreNotTruncated) {
  EXPECT_NE(with("model", "hidden_size", 256.5).find("model.hidden_size' has the wrong type"),
            std::string::npos);
  EXPECT_NE(with("metadata", "ulysses_degree", 1e300).find("wrong type"), std::string::npos);
  EXPECT_NE(with("coefficients", "logits_block_tokens", 18446744073709551615u)
                .find("logits_block_tokens"),
            std::string::npos);
  EXPECT_NE(with("model", "ffn_hidden_size", INT64_MAX).find("its model is invalid"),
            std::string::npos);
}

TEST(CalibrationHostile, DeepOrOverflowingJsonIsAnError) {
  EXPECT_NE(error_of("{\"format\": " + std::string(5000, '[') + std::string(5000, ']') + "}")
                .find("more than 64 levels"),
            std::string::npos);
  EXPECT_NE(error_of("{\"format\": 1e400}").find("is not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace infinipipe::cost
