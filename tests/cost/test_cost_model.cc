#include "cost/cost_model.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"

namespace infinipipe::cost {
namespace {

ModelConfig small_model() {
  ModelConfig m;
  m.num_layers = 8;
  m.hidden_size = 512;
  m.num_attention_heads = 8;
  m.vocab_size = 257;
  m.seq_length = 65536;
  return m;
}

ModelConfig llama7b() {
  ModelConfig m;
  m.num_layers = 32;
  m.hidden_size = 4096;
  m.num_attention_heads = 32;
  m.ffn_hidden_size = 11008;
  m.vocab_size = 32000;
  m.seq_length = 131072;
  return m;
}

CostModel cpu_model() {
  return CostModel(small_model(), device_preset("cpu", false), 1, false);
}

const StageShape kMid{.num_layers = 4};

TEST(CostModel, LayerFormulaMatchesHandComputation) {
  // Coefficients chosen by hand so the expected number is plain arithmetic.
  Coefficients c;
  c.alpha1 = 1e-9;
  c.alpha2 = 1e-6;
  c.beta1 = 1e-3;
  c.half_efficiency_tokens = 100;
  c.backward_factor = 2.0;
  c.recompute_factor = 1.0;
  override_span(c.collectives, false, 1e9, 0);
  override_span(c.collectives, true, 1e9, 0);
  CostModel cm(small_model(), device_preset("cpu", false), c, 1, false);
  // A tail slice (C=1000, s0=200) plus two packed sequences of 100 and 300 tokens.
  std::vector<SliceShape> chunk = {{1000, 200}, {0, 100}, {0, 300}};
  const double pairs = (1200.0 * 1200 - 1000.0 * 1000) + 100.0 * 100 + 300.0 * 300;
  const double t = 600;
  const double layer = 1e-9 * pairs + 1e-6 * t * (t + 100) / t;
  EXPECT_NEAR(cm.forward_time(chunk, kMid), 1e-3 + 4 * layer, 1e-12);
  EXPECT_NEAR(cm.backward_time(chunk, kMid), 1e-3 + 2 * 4 * layer, 1e-12);
  EXPECT_NEAR(cm.recompute_time(chunk, 3), 3 * layer, 1e-12);
  EXPECT_EQ(cm.recompute_time(chunk, 0), 0.0);
  c.collectives.row(Collective::send_recv, true).bus_bandwidth = 0;  // would divide by zero
  EXPECT_THROW(CostModel(small_model(), device_preset("cpu", false), c, 1, false), ConfigError);
}

TEST(CostModel, DerivedAlphasFollowMegatronFlops) {
  ModelConfig m = llama7b();
  DeviceSpec d = device_preset("a800-80gb", true);
  Coefficients c = CostModel::derive_coefficients(m, d, 1, true);
  EXPECT_DOUBLE_EQ(c.alpha1, 2.0 * 4096 / (d.peak_flops * d.attention_efficiency));
  const double matmul = 2.0 * (4096.0 * 3 * 4096 + 4096.0 * 4096 + 3 * 4096.0 * 11008);
  EXPECT_GT(c.alpha2, matmul / (d.peak_flops * d.matmul_efficiency));
  EXPECT_LT(c.alpha2, 1.1 * matmul / (d.peak_flops * d.matmul_efficiency));
  // Ulysses degree u divides the per-device work.
  Coefficients c4 = CostModel::derive_coefficients(m, d, 4, true);
  EXPECT_DOUBLE_EQ(c4.alpha1 * 4, c.alpha1);
  EXPECT_DOUBLE_EQ(c4.alpha2 * 4, c.alpha2);
}

TEST(CostModel, FlopsMatchMegatronFormula) {
  CostModel cm(llama7b(), device_preset("a800-80gb", true), 1, true);
  const double h = 4096, f = 11008, v = 32000, s = 8192;
  std::vector<SliceShape> one = {{0, 8192}};
  // Per layer: 2·s·(4h² + 3hf) for the matmuls + 2·s²·h for causal attention; head 2·s·h·V.
  const double expect = 32 * (2 * s * (4 * h * h + 3 * h * f) + 2 * s * s * h) + 2 * s * h * v;
  EXPECT_NEAR(cm.flops(one, 32, true), expect, expect * 1e-12);
  // Slicing a sequence does not change its FLOPs (the causal pairs telescope).
  std::vector<SliceShape> a = {{0, 4096}}, b = {{4096, 4096}};
  EXPECT_NEAR(cm.flops(a, 32, false) + cm.flops(b, 32, false), cm.flops(one, 32, false),
              expect * 1e-12);
}

TEST(CostModel, TimeMonotoneInTokensAndContext) {
  CostModel cm = cpu_model();
  double prev = 0;
  for (int64_t len = 64; len <= 32768; len *= 2) {
    std::vector<SliceShape> chunk = {{0, len}};
    double t = cm.forward_time(chunk, kMid);
    EXPECT_GT(t, prev) << len;
    EXPECT_GT(cm.backward_time(chunk, kMid), t);
    prev = t;
  }
  prev = 0;
  for (int64_t ctx = 0; ctx <= 65536; ctx += 4096) {
    std::vector<SliceShape> chunk = {{ctx, 1024}};
    double t = cm.forward_time(chunk, kMid);
    EXPECT_GT(t, prev) << ctx;
    prev = t;
  }
  // Adding a packed sequence to a chunk never makes it cheaper.
  std::vector<SliceShape> tail = {{60000, 16}};
  std::vector<SliceShape> tail_plus = {{60000, 16}, {0, 512}};
  EXPECT_GT(cm.forward_time(tail_plus, kMid), cm.forward_time(tail, kMid));
}

TEST(CostModel, SliceWithContextCostsMore) {
  CostModel cm = cpu_model();
  std::vector<SliceShape> with = {{8192, 2048}}, without = {{0, 2048}};
  EXPECT_GT(cm.forward_time(with, kMid), cm.forward_time(without, kMid));
  EXPECT_GT(cm.backward_time(with, kMid), cm.backward_time(without, kMid));
  EXPECT_GT(cm.recompute_time(with, 2), cm.recompute_time(without, 2));
}

TEST(CostModel, SmallChunksUnderUseTheDevice) {
  for (const char* dev : {"cpu", "a800-80gb", "h100-80gb"}) {
    CostModel cm(llama7b(), device_preset(dev, true), 1, true);
    StageShape st{.num_layers = 4};
    // One 8K sequence cut into 8 slices (same FLOPs) vs one chunk.
    double sliced = 0;
    for (int i = 0; i < 8; ++i) {
      std::vector<SliceShape> s = {{1024 * i, 1024}};
      sliced += cm.forward_time(s, st);
    }
    std::vector<SliceShape> whole = {{0, 8192}};
    EXPECT_GT(sliced, cm.forward_time(whole, st)) << dev;
    // Eight 1K sequences, one chunk each vs packed into one chunk.
    double apart = 0;
    std::vector<SliceShape> packed;
    for (int i = 0; i < 8; ++i) {
      std::vector<SliceShape> s = {{0, 1024}};
      apart += cm.forward_time(s, st);
      packed.push_back({0, 1024});
    }
    EXPECT_GT(apart, cm.forward_time(packed, st)) << dev;
    // Tiny slices are far from peak: 64 chunks of 128 tokens cost clearly more than 8 of 1K.
    double tiny = 0;
    for (int i = 0; i < 64; ++i) {
      std::vector<SliceShape> s = {{128 * i, 128}};
      tiny += cm.forward_time(s, st);
    }
    EXPECT_GT(tiny, 1.3 * sliced) << dev;
  }
}

TEST(CostModel, EmbeddingAndHeadAddWork) {
  CostModel cm = cpu_model();
  std::vector<SliceShape> chunk = {{0, 4096}};
  StageShape first{.num_layers = 4, .has_embedding = true};
  StageShape last{.num_layers = 4, .has_lm_head = true};
  EXPECT_GT(cm.forward_time(chunk, first), cm.forward_time(chunk, kMid));
  EXPECT_GT(cm.forward_time(chunk, last), cm.forward_time(chunk, kMid));
  EXPECT_GT(cm.static_bytes(first, 1, false), cm.static_bytes(kMid, 1, false));
  EXPECT_GT(cm.activation_bytes(chunk, last, 0), cm.activation_bytes(chunk, kMid, 0));
  EXPECT_GT(cm.backward_transient_bytes(chunk, last, 0),
            cm.backward_transient_bytes(chunk, kMid, 0));
  EXPECT_EQ(cm.forward_time({}, kMid), 0.0);
}

// The LM head's backward has its own factor: a preset charges it like the layers' (Megatron's
// backward computes the head's gradient), 0 charges it nothing (a loss that computes it forward).
TEST(CostModel, LmHeadBackwardHasItsOwnFactor) {
  const std::vector<SliceShape> chunk = {{0, 4096}};
  const StageShape last{.num_layers = 4, .has_lm_head = true};
  CostModel preset = cpu_model();
  const Coefficients& c = preset.coefficients();
  EXPECT_EQ(c.lm_head_backward_factor, c.backward_factor);
  const double head_fwd = preset.forward_time(chunk, last) - preset.forward_time(chunk, kMid);
  const double head_bwd = preset.backward_time(chunk, last) - preset.backward_time(chunk, kMid);
  EXPECT_GT(head_fwd, 0);
  EXPECT_NEAR(head_bwd, c.backward_factor * head_fwd, 1e-12);

  Coefficients fused = c;
  fused.lm_head_backward_factor = 0;
  CostModel cm(small_model(), preset.device(), fused, 1, false);
  EXPECT_NEAR(cm.backward_time(chunk, last), cm.backward_time(chunk, kMid), 1e-12);
  EXPECT_NEAR(cm.forward_time(chunk, last), preset.forward_time(chunk, last), 1e-12);
}

TEST(CostModel, Communication) {
  CostModel cm = cpu_model();
  std::vector<SliceShape> chunk = {{0, 1000}};
  EXPECT_EQ(cm.p2p_bytes(chunk), 1000 * 512 * 4);  // fp32 hidden states
  const CollectiveCost& link = cm.coefficients().collectives.row(Collective::send_recv, false);
  EXPECT_DOUBLE_EQ(cm.p2p_time(1 << 20, false),
                   (1 << 20) / link.bus_bandwidth + link.call_latency_s);
  EXPECT_GT(cm.p2p_time(1 << 20, true), cm.p2p_time(1 << 20, false));
  EXPECT_EQ(cm.p2p_time(0, false), 0.0);
  EXPECT_EQ(cm.collective_time(Collective::all_reduce, {0, 1, 8}, 1 << 20), 0.0);
  // The cpu preset's ring: no call latency, the link's latency per step.
  EXPECT_DOUBLE_EQ(cm.collective_time(Collective::all_reduce, {0, 4, 8}, 1 << 20),
                   2 * 0.75 * (1 << 20) / link.bus_bandwidth + 6 * link.call_latency_s);
  EXPECT_EQ(cm.ulysses_alltoall_time(4096), 0.0);  // degree 1
}

TEST(CostModel, UlyssesAllToAll) {
  ModelConfig m = llama7b();
  DeviceSpec d = device_preset("a800-80gb", true);
  CostModel u8(m, d, 8, true);
  const double bytes = 65536.0 / 8 * (2 * 4096 + 2 * 4096) * 2 * 7 / 8;
  const CollectiveCost& a2a = u8.coefficients().collectives.row(Collective::all_to_all, false);
  EXPECT_DOUBLE_EQ(u8.ulysses_alltoall_time(65536),
                   bytes / a2a.bus_bandwidth + 4 * a2a.call_latency_s);
  // The all-to-alls are part of the stage's forward time.
  CostModel u1(m, d, 1, true);
  std::vector<SliceShape> chunk = {{0, 65536}};
  StageShape st{.num_layers = 4};
  EXPECT_LT(u8.forward_time(chunk, st), u1.forward_time(chunk, st) / 4);
  EXPECT_GT(u8.forward_time(chunk, st), u1.forward_time(chunk, st) / 8);
}

TEST(CostModel, StaticBytes) {
  ModelConfig m = small_model();
  CostModel fp32(m, device_preset("cpu", false), 1, false);
  CostModel bf16(m, device_preset("a800-80gb", true), 1, true);
  const double p = 4.0 * m.params_per_layer();
  EXPECT_EQ(fp32.static_bytes(kMid, 1, false), static_cast<int64_t>(16 * p));
  EXPECT_EQ(bf16.static_bytes(kMid, 1, false), static_cast<int64_t>(18 * p));
  // Distributed optimizer: only the optimizer part shrinks with dp.
  EXPECT_EQ(fp32.static_bytes(kMid, 4, true), static_cast<int64_t>(8 * p + 8 * p / 4));
  EXPECT_EQ(fp32.static_bytes(kMid, 4, false), fp32.static_bytes(kMid, 1, false));
  // One stage holding everything equals the whole model.
  StageShape all{.num_layers = m.num_layers, .has_embedding = true, .has_lm_head = true};
  EXPECT_EQ(fp32.static_bytes(all, 1, false), 16 * m.params_total());
  EXPECT_THROW(fp32.static_bytes(kMid, 0, false), ConfigError);
}

TEST(CostModel, RecomputeLowersActivationsButKeepsKv) {
  CostModel cm = cpu_model();
  std::vector<SliceShape> split = {{0, 4096, false}};
  std::vector<SliceShape> tail = {{4096, 4096}};
  int64_t prev = INT64_MAX;
  for (int64_t r = 0; r <= kMid.num_layers; ++r) {
    int64_t a = cm.activation_bytes(split, kMid, r);
    EXPECT_LT(a, prev);
    prev = a;
  }
  // K/V of a non-final slice stay whatever the recompute; final slices keep none.
  EXPECT_GT(cm.kv_keep_bytes(split, kMid), 0);
  EXPECT_EQ(cm.kv_keep_bytes(tail, kMid), 0);
  // Without recompute, activation + kv_keep of a split slice = activations of a final slice.
  std::vector<SliceShape> same_final = {{0, 4096}};
  EXPECT_NEAR(cm.activation_bytes(split, kMid, 0) + cm.kv_keep_bytes(split, kMid),
              cm.activation_bytes(same_final, kMid, 0), 2);
  // Linear in tokens (flash-attention style), independent of context.
  std::vector<SliceShape> dbl = {{0, 8192}};
  EXPECT_NEAR(cm.activation_bytes(dbl, kMid, 1), 2 * cm.activation_bytes(same_final, kMid, 1), 2);
  EXPECT_EQ(cm.activation_bytes(tail, kMid, 0), cm.activation_bytes(same_final, kMid, 0));
  // dK/dV buffer: for the prefix (context) of a sliced sequence only.
  EXPECT_EQ(cm.dkv_buffer_bytes(same_final, kMid), 0);
  EXPECT_GT(cm.dkv_buffer_bytes(tail, kMid), 0);
  // Recomputing every layer adds one layer's activations to the backward working set; with the
  // top layer kept, its freed stash makes room for the recompute of the lower ones.
  EXPECT_GT(cm.backward_transient_bytes(tail, kMid, kMid.num_layers),
            cm.backward_transient_bytes(tail, kMid, 0));
  EXPECT_EQ(cm.backward_transient_bytes(tail, kMid, kMid.num_layers - 1),
            cm.backward_transient_bytes(tail, kMid, 0));
  EXPECT_THROW(cm.activation_bytes(tail, kMid, 5), Error);
}

TEST(CostModel, LastStageHoldsOnlyALogitsBlock) {
  CostModel cm(llama7b(), device_preset("h100-80gb", true), 1, true);
  StageShape last{.num_layers = 1, .has_lm_head = true};
  std::vector<SliceShape> a = {{0, 16384}}, b = {{0, 65536}};
  const int64_t logits = cm.backward_transient_bytes(b, last, 0) -
                         cm.backward_transient_bytes(b, StageShape{.num_layers = 1}, 0);
  EXPECT_EQ(logits, 2LL * 1024 * 32000 * 4);
  EXPECT_EQ(cm.forward_transient_bytes(b, last) -
                cm.forward_transient_bytes(b, StageShape{.num_layers = 1}),
            1024LL * 32000 * 4);
  EXPECT_GT(cm.forward_transient_bytes(b, StageShape{.num_layers = 1}),
            cm.forward_transient_bytes(a, StageShape{.num_layers = 1}));
  EXPECT_EQ(cm.backward_transient_bytes(a, last, 0) -
                cm.backward_transient_bytes(a, StageShape{.num_layers = 1}, 0),
            logits);
}

TEST(CostModel, GpuNamesAsDriversReportThemFindTheirPreset) {
  EXPECT_EQ(gpu_preset("NVIDIA H100 80GB HBM3"), "h100-80gb");
  EXPECT_EQ(gpu_preset("NVIDIA H200"), "h200-141gb");
  EXPECT_EQ(gpu_preset("NVIDIA A800-SXM4-80GB"), "a800-80gb");
  EXPECT_EQ(gpu_preset("NVIDIA GeForce RTX 4090"), "");
  for (const char* name : {"NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A800-SXM4-80GB"}) {
    EXPECT_EQ(device_preset(gpu_preset(name), true).name, gpu_preset(name));
  }
}

TEST(CostModel, Presets) {
  for (const char* name : device_preset_names()) {
    for (bool bf16 : {false, true}) {
      DeviceSpec d = device_preset(name, bf16);
      EXPECT_EQ(d.name, name);
      EXPECT_GT(d.peak_flops, 0);
      EXPECT_GT(d.memory_bytes, 0);
      EXPECT_GT(d.intra_node_bandwidth, d.inter_node_bandwidth);
      EXPECT_GT(d.matmul_efficiency, 0);
      EXPECT_LE(d.matmul_efficiency, 1);
      EXPECT_FALSE(d.sources.empty());
    }
  }
  EXPECT_GT(device_preset("h100-80gb", true).peak_flops,
            device_preset("a800-80gb", true).peak_flops);
  EXPECT_GT(device_preset("h200-141gb", true).memory_bytes,
            device_preset("h100-80gb", true).memory_bytes);
  EXPECT_EQ(device_preset("cpu", false).memory_bytes, 24LL << 30);
  EXPECT_THROW(device_preset("tpu-v9", true), ConfigError);
  try {
    device_preset("a100", true);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("a800-80gb"), std::string::npos);
  }
}

TEST(CostModel, FromConfig) {
  Config cfg;
  cfg.model = small_model();
  cfg.cluster.device = "h200-141gb";
  cfg.training.bf16 = true;
  CostModel cm = CostModel::from_config(cfg);
  EXPECT_EQ(cm.device().name, "h200-141gb");
  EXPECT_TRUE(cm.bf16());
  cfg.cluster.device_memory = 40LL << 30;
  EXPECT_EQ(CostModel::from_config(cfg).device().memory_bytes, 40LL << 30);
  cfg.cluster.device = "nope";
  EXPECT_THROW(CostModel::from_config(cfg), ConfigError);
}

TEST(CostModel, BadSlicesAreErrors) {
  CostModel cm = cpu_model();
  std::vector<SliceShape> bad = {{0, 0}};
  EXPECT_THROW(cm.forward_time(bad, kMid), Error);
  std::vector<SliceShape> neg = {{-5, 10}};
  EXPECT_THROW(cm.activation_bytes(neg, kMid, 0), Error);
}

}  // namespace
}  // namespace infinipipe::cost
