// The cost model of the model families: an explicit head_dim makes q/o hidden x heads·head_dim
// and attention heads·head_dim per pair; Qwen3's q/k norm saves its inputs; the parameters of a
// stage count Qwen2's biases and Qwen3's norms.
#include <gtest/gtest.h>

#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::cost::families_test {
namespace {

// tests/ckpt/data/hf_families/qwen3.json: 4 heads of 24 (96 != hidden 64), 2 kv heads.
ModelConfig qwen3_small() {
  ModelConfig m;
  m.family = "qwen3";
  m.num_layers = 2;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.num_query_groups = 2;
  m.kv_channels = 24;
  m.qk_layernorm = true;
  m.ffn_hidden_size = 160;
  m.vocab_size = 1000;
  m.seq_length = 512;
  m.tie_embeddings = false;
  return m;
}

TEST(CostFamilies, FlopsUseHeadsTimesHeadDimNotHiddenSquared) {
  const ModelConfig m = qwen3_small();
  m.validate();
  const CostModel cm(m, device_preset("cpu", false), 1, false);
  const std::vector<SliceShape> chunk = {{100, 200, true}};
  const double h = 64, q = 4 * 24, kv = 2 * 24, f = 160, t = 200, v = 1000;
  const double pairs2 = 300.0 * 300.0 - 100.0 * 100.0;
  const double per_token = 2 * (h * q + 2 * h * kv + q * h + 3 * h * f);
  const double want = 2 * (per_token * t + 2 * q * pairs2) + 2 * h * v * t;
  EXPECT_DOUBLE_EQ(cm.flops(chunk, 2, true), want);
  // With head_dim = hidden / heads the same formula is Megatron's hidden² one.
  ModelConfig llama = m;
  llama.family = "llama";
  llama.qk_layernorm = false;
  llama.kv_channels = 0;
  const CostModel cl(llama, device_preset("cpu", false), 1, false);
  const double lq = 64, lkv = 2 * 16;
  const double llama_token = 2 * (h * h + 2 * h * lkv + h * h + 3 * h * f);
  EXPECT_DOUBLE_EQ(cl.flops(chunk, 2, false), 2 * (llama_token * t + 2 * lq * pairs2));
}

TEST(CostFamilies, TimeAndActivationsGrowWithHeadDimAndQkNorm) {
  const ModelConfig m = qwen3_small();
  ModelConfig wide = m;  // the same without the q/k norm
  wide.family = "llama";
  wide.qk_layernorm = false;
  const DeviceSpec d = device_preset("h100-80gb", true);
  const Coefficients c = CostModel::derive_coefficients(m, d, 1, true);
  const Coefficients w = CostModel::derive_coefficients(wide, d, 1, true);
  // Attention: 2·heads·head_dim FLOPs per pair per product.
  EXPECT_DOUBLE_EQ(c.alpha1, 2.0 * 96 / (d.peak_flops * d.attention_efficiency));
  // The norm's saved inputs (q and k before it, bf16) and an fp32 rstd per head.
  EXPECT_DOUBLE_EQ(c.act_bytes_per_token_layer - w.act_bytes_per_token_layer,
                   (96 + 48) * 2.0 + (4 + 2) * 4.0);
  EXPECT_GT(c.alpha2, w.alpha2);
}

TEST(CostFamilies, StageWeightsCountBiasesNormsAndTheUntiedHead) {
  ModelConfig qwen2 = qwen3_small();
  qwen2.family = "qwen2";
  qwen2.qk_layernorm = false;
  qwen2.add_qkv_bias = true;
  qwen2.kv_channels = 0;
  const CostModel cm(qwen2, device_preset("cpu", false), 1, false);
  const StageShape last{2, false, true};
  // Layers (with q/k/v biases 64 + 2·32) + final norm + untied head, 16 bytes each (fp32 Adam).
  const double layer = 2 * 64 + 64 * 64 + 2 * 64 * 32 + 64 * 64 + (64 + 2 * 32) + 3 * 64 * 160;
  EXPECT_EQ(qwen2.params_per_layer(), static_cast<int64_t>(layer));
  EXPECT_EQ(cm.static_bytes(last, 1, false),
            static_cast<int64_t>((2 * layer + 64 + 1000 * 64) * 16));
}

}  // namespace
}  // namespace infinipipe::cost::families_test
