#include "ckpt/hf_tensors.h"

#include <fmt/format.h>

namespace infinipipe {

std::map<std::string, std::vector<int64_t>> hf_model_tensors(const ModelConfig& m) {
  const int64_t C = m.hidden_size, V = m.vocab_size, F = m.ffn_size(), D = m.head_dim();
  const int64_t Q = m.q_size(), KV = m.kv_size();
  std::map<std::string, std::vector<int64_t>> out = {{"model.embed_tokens.weight", {V, C}},
                                                     {"model.norm.weight", {C}}};
  if (!m.tie_embeddings) out["lm_head.weight"] = {V, C};
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    out[p + "input_layernorm.weight"] = {C};
    out[p + "self_attn.q_proj.weight"] = {Q, C};
    out[p + "self_attn.k_proj.weight"] = {KV, C};
    out[p + "self_attn.v_proj.weight"] = {KV, C};
    out[p + "self_attn.o_proj.weight"] = {C, Q};
    if (m.add_qkv_bias) {  // Qwen2: q/k/v biases, o_proj none
      out[p + "self_attn.q_proj.bias"] = {Q};
      out[p + "self_attn.k_proj.bias"] = {KV};
      out[p + "self_attn.v_proj.bias"] = {KV};
    }
    if (m.qk_layernorm) {  // Qwen3: RMSNorm weights over one head
      out[p + "self_attn.q_norm.weight"] = {D};
      out[p + "self_attn.k_norm.weight"] = {D};
    }
    out[p + "post_attention_layernorm.weight"] = {C};
    out[p + "mlp.gate_proj.weight"] = {F, C};
    out[p + "mlp.up_proj.weight"] = {F, C};
    out[p + "mlp.down_proj.weight"] = {C, F};
  }
  return out;
}

}  // namespace infinipipe
