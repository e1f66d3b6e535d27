// Memory coefficients of the CPU engine, read off its allocator: what StageEngine keeps per
// token and layer (stash_breakdown), the attention tiles of a backward, the optimizer state.
// Tests run chunks through a StageEngine and check the cost model predicts the tracker's bytes.
#include "model/attention.h"
#include "model/classifier.h"
#include "model/engine.h"
#include "profile/profile.h"

namespace infinipipe::profile {

cost::Coefficients profile_memory_coefficients(const ModelConfig& m, Optimizer optimizer,
                                               cost::Coefficients c) {
  const StashBreakdown b = StageEngine::stash_breakdown(m);
  const double f = sizeof(float);
  const double C = static_cast<double>(m.hidden_size);
  // A kept layer holds its stash and its K/V; a recomputed one only its input.
  c.act_bytes_per_token_layer = static_cast<double>(b.full_per_token_layer + b.kv_per_token_layer);
  c.recompute_bytes_per_token_layer = static_cast<double>(b.recompute_per_token_layer);
  c.kv_bytes_per_token_layer = static_cast<double>(b.kv_per_token_layer);
  c.dkv_bytes_per_token_layer = static_cast<double>(b.kv_per_token_layer);  // dK, dV in fp32
  // Backward: the shared workspace, a copy of the output grad, and the chunk's own dK/dV at the
  // layer being differentiated.
  c.grad_bytes_per_token = static_cast<double>(b.workspace_backward_per_token) + C * f +
                           static_cast<double>(b.kv_per_token_layer);
  // The last stage differentiates the loss in its forward and reuses that saved gradient as the
  // backward's buffer instead of copying it; nothing of the logits lives in its backward.
  c.lm_head_bytes_per_token = static_cast<double>(b.head_per_token);
  c.lm_head_grad_reuse_bytes_per_token = C * f;
  c.backward_logits_blocks = 0;
  c.logits_block_tokens = kClassifierBlock;
  c.index_bytes_per_token = static_cast<double>(b.index_per_token);
  c.embedding_bytes_per_token = 0;  // token ids are in the index on every stage
  // A forward's working set at its top layer: the SwiGLU output and the layer output.
  c.fwd_transient_bytes_per_token = static_cast<double>(m.ffn_size()) * f + C * f;
  const AttnDims none{0, m.num_attention_heads, m.kv_heads(), m.head_dim()};
  c.attn_workspace_bytes = static_cast<double>(attention_workspace_floats(none)) * f;
  c.attn_workspace_bytes_per_longest_token = static_cast<double>(m.num_attention_heads) * f;
  // fp32 weights and grads; AdamW keeps m and v (SGD here keeps no moments).
  c.optimizer_bytes_per_param = optimizer == Optimizer::adamw ? 2 * f : 0;
  c.bytes_per_param = 2 * f + c.optimizer_bytes_per_param;
  c.p2p_bytes_per_token = C * f;
  return c;
}

cost::CostModel engine_cost_model(const Config& cfg) {
  const cost::CostModel base = cost::CostModel::from_config(cfg);
  cost::Coefficients c = base.coefficients();
  if (cfg.cluster.calibration.empty()) {
    // The engine's loss computes the LM head's gradient in forward (a profile measures this).
    c.lm_head_per_token *= 1.0 + c.lm_head_backward_factor;
    c.lm_head_backward_factor = 0.0;
  }
  // The calibration's measured hosts stay with it.
  return base.with_coefficients(profile_memory_coefficients(cfg.model, cfg.training.optimizer, c));
}

cost::CostModel planning_cost_model(const Config& cfg) {
  return cfg.cluster.device == "cpu" ? engine_cost_model(cfg) : cost::CostModel::from_config(cfg);
}

}  // namespace infinipipe::profile
