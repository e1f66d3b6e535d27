// ZeRO-3 over the whole cluster in DeepSpeed's and FlexSP's models: unit by unit (embedding, each
// layer, LM head), gathered before its forward and its backward, the next unit prefetched while
// one computes, both slowed while they overlap (the A800 preset's overlap slowdown); gradients
// reduce-scattered after each unit (FSDP, FlexSP's) or in DeepSpeed's buckets of 5e8 parameters,
// which hold this whole model and so go at the end of the backward. Checked against the schedule
// worked out by hand for a 2-layer model on 2 devices of one node.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sim/baseline_deepspeed.h"
#include "sim/baseline_flexsp.h"

namespace infinipipe::sim {
namespace {

Config fsdp_cluster() {
  Config cfg;
  cfg.model.num_layers = 2;
  cfg.model.hidden_size = 1024;
  cfg.model.num_attention_heads = 8;
  cfg.model.ffn_hidden_size = 2816;
  cfg.model.vocab_size = 32000;
  cfg.model.tie_embeddings = false;
  cfg.model.seq_length = 65536;
  cfg.cluster.device = "a800-80gb";
  cfg.cluster.num_devices = 2;
  cfg.cluster.devices_per_node = 2;
  cfg.training.bf16 = true;
  return cfg;
}

// The hand schedule: units u0 = embedding, u1, u2 = layers, u3 = final norm + LM head; ring
// all-gather / reduce-scatter of a unit over 2 devices = ½ · bf16 bytes / B + latency.
double hand_exposed(const cost::CostModel& g, const Config& cfg,
                    std::span<const cost::SliceShape> chunk, bool deepspeed_bucket) {
  const ModelConfig& m = cfg.model;
  const cost::Coefficients& c = g.coefficients();
  auto ring = [&](cost::Collective op, double params) {
    const cost::CollectiveCost& r = c.collectives.row(op, false);
    return r.call_latency_s + r.step_latency_s + 0.5 * params * 2.0 / r.bus_bandwidth;
  };
  const double emb = static_cast<double>(m.vocab_size * m.hidden_size);
  const double layer = static_cast<double>(m.params_per_layer());
  const double head = emb + static_cast<double>(m.hidden_size);
  constexpr cost::Collective gather = cost::Collective::all_gather;
  constexpr cost::Collective scatter = cost::Collective::reduce_scatter;
  const double g_emb = ring(gather, emb), g_layer = ring(gather, layer),
               g_head = ring(gather, head);
  const double r_emb = ring(scatter, emb), r_layer = ring(scatter, layer),
               r_head = ring(scatter, head);
  const double tokens = static_cast<double>(cost::chunk_tokens(chunk));
  const cost::StageShape all{.num_layers = 2, .has_embedding = true, .has_lm_head = true};
  const double f_emb = c.embedding_per_token * tokens, f_layer = g.layer_seconds(chunk, c),
               f_head = g.lm_head_seconds(chunk, all, c);
  const double b_emb = c.backward_factor * f_emb, b_layer = c.backward_factor * f_layer,
               b_head = c.lm_head_backward_factor * f_head;
  const double k = c.collectives.overlap_slowdown;
  const auto ov = [k](double comm, double compute) {
    return std::max(0.0, comm - compute) + (k - 1) * std::min(comm, compute);
  };
  // Forward: u0's gather waits for nothing; u1's hides behind u0, u2's behind u1, u3's behind u2.
  const double forward = g_emb + ov(g_layer, f_emb) + ov(g_layer, f_layer) + ov(g_head, f_layer);
  // Backward, u3 first: its gather is exposed; while u_i computes, the next unit's gather and (per
  // unit) the previous unit's reduce-scatter share the stream; u0's comes last, exposed. With
  // DeepSpeed's bucket every reduce-scatter is one, of all the parameters, at the end.
  if (deepspeed_bucket)
    return forward + g_head + ov(g_layer, b_head) + ov(g_layer, b_layer) + ov(g_emb, b_layer) +
           ring(scatter, emb + 2 * layer + head);
  const double backward = g_head + ov(g_layer, b_head) + ov(g_layer + r_head, b_layer) +
                          ov(g_emb + r_layer, b_layer) + ov(r_layer, b_emb) + r_emb;
  return forward + backward;
}

TEST(BaselineFsdp, DeepSpeedBucketsAndFsdpUnitsAsWorkedOutByHand) {
  const Config cfg = fsdp_cluster();
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const cost::CostModel g = cm.with_ulysses_degree(2, 0);
  for (int64_t tokens : {int64_t{64}, int64_t{65536}}) {  // gathers exposed, then hidden
    const std::vector<int64_t> batch = {tokens};
    const std::vector<cost::SliceShape> chunk = {{0, tokens}};
    const double fsdp = hand_exposed(g, cfg, chunk, false);
    EXPECT_NEAR(zero3_micro_batch_exposed(g, cfg, chunk), fsdp, 1e-12 + 1e-9 * fsdp) << tokens;
    const double want = hand_exposed(g, cfg, chunk, true);
    const BaselineResult r = simulate_deepspeed(cm, cfg, batch, {2, 0, 0});
    EXPECT_NEAR(r.parts.zero, want, 1e-12 + 1e-9 * want) << tokens;
  }
  // The two sizes exercise both sides: a short chunk leaves nearly every gather exposed, a long
  // one only the first gather and the last reduce-scatter.
  const std::vector<cost::SliceShape> small = {{0, 64}}, large = {{0, 65536}};
  const double c_ring =
      0.5 * static_cast<double>(cfg.model.params_per_layer()) * 2.0 /
      cm.coefficients().collectives.row(cost::Collective::all_gather, false).bus_bandwidth;
  EXPECT_GT(c_ring, g.layer_seconds(small, g.coefficients()));
  EXPECT_LT(2 * c_ring,
            g.coefficients().backward_factor * g.layer_seconds(large, g.coefficients()));
}

// FlexSP's lock step: a micro-batch's exposed ZeRO-3 time is its slowest group's.
TEST(BaselineFsdp, FlexSpMicroBatchPaysTheSlowestGroupsExposedGathers) {
  Config cfg = fsdp_cluster();
  cfg.cluster.num_devices = 4;
  cfg.cluster.devices_per_node = 4;
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> batch = {32768, 1024};
  const FlexSpResult f = flexsp_evaluate(
      cm, cfg, batch, {{{.size = 2, .lengths = {32768}}, {.size = 2, .lengths = {1024}}}},
      {.recompute_layers = 0, .extra_micro_batches = 0});
  const cost::CostModel g = cm.with_ulysses_degree(2, 0);
  const std::vector<cost::SliceShape> slow = {{0, 32768}};
  ASSERT_EQ(f.micro_batches.size(), 1u);
  EXPECT_EQ(f.micro_batches[0].slowest, 0u);
  const double want = zero3_micro_batch_exposed(g, cfg, slow);
  EXPECT_NEAR(f.micro_batches[0].zero_exposed_s, want, 1e-12 + 1e-9 * want);
  EXPECT_NEAR(f.result.parts.zero, want, 1e-12 + 1e-9 * want);
}

}  // namespace
}  // namespace infinipipe::sim
