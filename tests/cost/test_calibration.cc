#include "cost/calibration.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/test_temp.h"
#include "core/error.h"

namespace infinipipe::cost {
namespace {

Calibration sample() {
  Calibration c;
  c.machine = "test-box";
  c.date = "2026-11-29T07:00:00Z";
  c.notes = "unit test";
  c.model.num_layers = 4;
  c.model.hidden_size = 256;
  c.model.num_attention_heads = 4;
  c.model.num_query_groups = 2;
  c.model.vocab_size = 257;
  c.model.seq_length = 8192;
  c.fit_residual_forward = 0.031;
  c.fit_residual_backward = 0.047;
  c.device = device_preset("cpu", false);
  c.device.sgemm_flops = 1.875e11;  // as if measured
  c.coeffs = CostModel::derive_coefficients(c.model, c.device, 1, false);
  c.coeffs.alpha1 *= 1.37;  // as if measured
  c.coeffs.beta1 = 3.25e-4;
  c.coeffs.act_bytes_per_token_layer = 12345.5;
  return c;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(Calibration, RoundTrip) {
  const std::string path = test::test_temp_path("rt.json").string();
  Calibration a = sample();
  save_calibration(a, path);
  Calibration b = load_calibration(path);
  std::remove(path.c_str());
  EXPECT_EQ(b.machine, a.machine);
  EXPECT_EQ(b.date, a.date);
  EXPECT_EQ(b.model.hidden_size, 256);
  EXPECT_EQ(b.model.kv_heads(), 2);
  EXPECT_EQ(b.model.ffn_size(), a.model.ffn_size());
  EXPECT_DOUBLE_EQ(b.fit_residual_backward, 0.047);
  EXPECT_EQ(b.device.name, "cpu");
  EXPECT_EQ(b.device.memory_bytes, a.device.memory_bytes);
  EXPECT_DOUBLE_EQ(b.device.sgemm_flops, 1.875e11);
  EXPECT_EQ(b.device.sources, a.device.sources);
  EXPECT_DOUBLE_EQ(b.coeffs.alpha1, a.coeffs.alpha1);
  EXPECT_DOUBLE_EQ(b.coeffs.beta1, 3.25e-4);
  EXPECT_DOUBLE_EQ(b.coeffs.act_bytes_per_token_layer, 12345.5);
  EXPECT_EQ(b.coeffs.logits_block_tokens, a.coeffs.logits_block_tokens);
  EXPECT_EQ(calibration_to_json(a), calibration_to_json(b));
}

TEST(Calibration, DrivesTheCostModel) {
  const std::string path = test::test_temp_path("cfg.json").string();
  Calibration cal = sample();
  save_calibration(cal, path);
  Config cfg;
  cfg.model = cal.model;
  cfg.cluster.calibration = path;
  CostModel cm = CostModel::from_config(cfg);
  EXPECT_DOUBLE_EQ(cm.coefficients().alpha1, cal.coeffs.alpha1);
  std::vector<SliceShape> chunk = {{0, 1000}};
  StageShape st{.num_layers = 2};
  CostModel preset(cal.model, cal.device, 1, false);
  EXPECT_GT(cm.forward_time(chunk, st), preset.forward_time(chunk, st));
  // A calibration fitted for another model shape is refused with a way out.
  cfg.model.hidden_size = 512;
  EXPECT_THROW(CostModel::from_config(cfg), ConfigError);
  cfg.model = cal.model;
  cfg.training.bf16 = true;
  EXPECT_THROW(CostModel::from_config(cfg), ConfigError);
  std::remove(path.c_str());
}

TEST(Calibration, BadFilesAreClearErrors) {
  EXPECT_THROW(load_calibration(test::test_temp_path("does-not-exist.json").string()), Error);
  const std::string path = test::test_temp_path("bad.json").string();
  auto message = [&](const std::string& text) -> std::string {
    write(path, text);
    try {
      load_calibration(path);
    } catch (const ConfigError&) {
      return "config error (wrong kind)";
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message("{ not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(message("[1,2]").find("not an infinipipe calibration"), std::string::npos);
  const std::string good = calibration_to_json(sample());
  std::string v3 = good;
  v3.replace(v3.find("\"version\": 2"), 12, "\"version\": 3");
  EXPECT_NE(message(v3).find("version 3"), std::string::npos);
  std::string missing = good;
  missing.replace(missing.find("\"alpha2\""), 8, "\"alpha9\"");
  EXPECT_NE(message(missing).find("coefficients.alpha2"), std::string::npos);
  std::string wrong_type = good;
  wrong_type.replace(wrong_type.find("\"machine\": \"test-box\""), 21, "\"machine\": 7");
  EXPECT_NE(message(wrong_type).find("wrong type"), std::string::npos);
  std::string zero_bw = good;
  const size_t at = zero_bw.find("\"bus_bandwidth\": ");
  zero_bw.replace(at, zero_bw.find(',', at) - at, "\"bus_bandwidth\": 0");
  EXPECT_NE(message(zero_bw).find("must be > 0"), std::string::npos);
  // The measured sgemm rate is optional (older files lack it: 0, not measured), never negative.
  std::string no_sgemm = good;
  const size_t sg = no_sgemm.find("\"sgemm_flops\": ");
  no_sgemm.erase(sg, no_sgemm.find(',', sg) + 1 - sg);
  EXPECT_EQ(message(no_sgemm), "no error");
  EXPECT_EQ(load_calibration(path).device.sgemm_flops, 0);
  std::string bad_sgemm = good;
  bad_sgemm.replace(sg, bad_sgemm.find(',', sg) - sg, "\"sgemm_flops\": -1");
  EXPECT_NE(message(bad_sgemm).find("device.sgemm_flops"), std::string::npos);
  std::remove(path.c_str());
}

// Version 1 named the bytes a recomputed layer keeps "ckpt_bytes_per_token_layer": such a file
// loads equal to its version-2 form, and is saved again as version 2.
TEST(Calibration, VersionOneWithTheOldRecomputeKeyLoads) {
  Calibration a = sample();
  a.coeffs.recompute_bytes_per_token_layer = 777.25;
  const std::string v2 = calibration_to_json(a);
  std::string v1 = v2;
  v1.replace(v1.find("\"version\": 2"), 12, "\"version\": 1");
  const std::string key = "\"recompute_bytes_per_token_layer\"";
  v1.replace(v1.find(key), key.size(), "\"ckpt_bytes_per_token_layer\"");
  const Calibration b = calibration_from_json(v1, "test");
  EXPECT_DOUBLE_EQ(b.coeffs.recompute_bytes_per_token_layer, 777.25);
  EXPECT_EQ(b.version, kCalibrationVersion);
  EXPECT_EQ(calibration_to_json(b), v2);
  // The new key in a version-1 file is not the old one: refused, naming the field it lacks.
  std::string mixed = v2;
  mixed.replace(mixed.find("\"version\": 2"), 12, "\"version\": 1");
  try {
    calibration_from_json(mixed, "test");
    ADD_FAILURE() << "a version-1 file without ckpt_bytes_per_token_layer loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt_bytes_per_token_layer"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace infinipipe::cost

namespace infinipipe::cost {
namespace {

// The engine-specific memory terms came after the first files: a file without them still loads
// (with the presets' values); with them they round-trip; negative values are refused.
TEST(Calibration, EngineMemoryTermsAreOptional) {
  Calibration a = sample();
  a.coeffs.index_bytes_per_token = 12;
  a.coeffs.attn_workspace_bytes = 135680;
  a.coeffs.attn_workspace_bytes_per_longest_token = 16;
  a.coeffs.backward_logits_blocks = 0;
  a.coeffs.lm_head_grad_reuse_bytes_per_token = 1024;
  a.coeffs.lm_head_backward_factor = 0.25;
  const Calibration b = calibration_from_json(calibration_to_json(a), "test");
  EXPECT_EQ(b.coeffs.index_bytes_per_token, 12);
  EXPECT_EQ(b.coeffs.attn_workspace_bytes, 135680);
  EXPECT_EQ(b.coeffs.attn_workspace_bytes_per_longest_token, 16);
  EXPECT_EQ(b.coeffs.backward_logits_blocks, 0);
  EXPECT_EQ(b.coeffs.lm_head_grad_reuse_bytes_per_token, 1024);
  EXPECT_EQ(b.coeffs.lm_head_backward_factor, 0.25);

  std::string text = calibration_to_json(sample());
  for (const char* key : {"index_bytes_per_token", "attn_workspace_bytes_per_longest_token",
                          "attn_workspace_bytes", "backward_logits_blocks",
                          "lm_head_grad_reuse_bytes_per_token", "lm_head_backward_factor"}) {
    const size_t at = text.find(std::string("\"") + key + "\"");
    ASSERT_NE(at, std::string::npos) << key;
    const size_t end = text.find('\n', at);
    text.erase(at, end - at + 1);
  }
  // The last coefficient lost its successor: drop the dangling comma JSON would refuse.
  const size_t close = text.rfind('}', text.rfind('}') - 1);
  const size_t comma = text.rfind(',', close);
  if (text.find_first_not_of(" \n", comma + 1) == close) text.erase(comma, 1);
  const Calibration old = calibration_from_json(text, "old");
  EXPECT_EQ(old.coeffs.index_bytes_per_token, 0);
  EXPECT_EQ(old.coeffs.backward_logits_blocks, 2);
  // An old file charged the LM head's backward like the layers'.
  EXPECT_EQ(old.coeffs.lm_head_backward_factor, old.coeffs.backward_factor);

  std::string bad = calibration_to_json(a);
  const size_t at = bad.find("\"index_bytes_per_token\": 12");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, 27, "\"index_bytes_per_token\": -1");
  EXPECT_THROW(calibration_from_json(bad, "bad"), Error);
}

}  // namespace
}  // namespace infinipipe::cost
