#include "ckpt/checkpoint_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace infinipipe {

nlohmann::json checkpoint_hf_config(const ModelConfig& m) {
  return {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", m.hidden_size},
      {"intermediate_size", m.ffn_size()},
      {"num_attention_heads", m.num_attention_heads},
      {"num_key_value_heads", m.kv_heads()},
      {"num_hidden_layers", m.num_layers},
      {"head_dim", m.head_dim()},
      {"vocab_size", m.vocab_size},
      {"max_position_embeddings", m.max_positions()},
      {"rope_theta", m.rotary_base},
      {"rope_scaling", nullptr},
      {"rms_norm_eps", m.norm_epsilon},
      {"tie_word_embeddings", m.tie_embeddings},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"mlp_bias", false},
      {"initializer_range", 0.02},
      {"pretraining_tp", 1},
      {"use_cache", true},
      {"torch_dtype", "float32"},
  };
}

ModelConfig checkpoint_model_from_hf(const nlohmann::json& hf, const std::string& path) {
  auto num = [&](const char* key) -> const nlohmann::json& {
    if (!hf.is_object() || !hf.contains(key) || !hf[key].is_number()) {
      fail("{}: field {} is missing or not a number; the checkpoint is damaged", path, key);
    }
    return hf[key];
  };
  if (hf.value("model_type", std::string()) != "llama") {
    fail("{}: model_type is not \"llama\"; this is not an infinipipe/Llama checkpoint", path);
  }
  ModelConfig m;
  m.num_layers = num("num_hidden_layers").get<int64_t>();
  m.hidden_size = num("hidden_size").get<int64_t>();
  m.num_attention_heads = num("num_attention_heads").get<int64_t>();
  m.num_query_groups = num("num_key_value_heads").get<int64_t>();
  m.ffn_hidden_size = num("intermediate_size").get<int64_t>();
  m.vocab_size = num("vocab_size").get<int64_t>();
  m.max_position_embeddings = num("max_position_embeddings").get<int64_t>();
  m.rotary_base = num("rope_theta").get<double>();
  m.norm_epsilon = num("rms_norm_eps").get<double>();
  m.tie_embeddings = hf.value("tie_word_embeddings", false);
  return m;
}

std::vector<std::string> checkpoint_model_diff(const ModelConfig& saved,
                                               const ModelConfig& current) {
  std::vector<std::string> out;
  auto cmp = [&](const char* flag, auto a, auto b) {
    if (a != b) out.push_back(fmt::format("checkpoint has {} {}, this run has {}", flag, a, b));
  };
  cmp("num-layers", saved.num_layers, current.num_layers);
  cmp("hidden-size", saved.hidden_size, current.hidden_size);
  cmp("num-attention-heads", saved.num_attention_heads, current.num_attention_heads);
  cmp("num-query-groups", saved.kv_heads(), current.kv_heads());
  cmp("ffn-hidden-size", saved.ffn_size(), current.ffn_size());
  cmp("vocab-size", saved.vocab_size, current.vocab_size);
  cmp("rotary-base", saved.rotary_base, current.rotary_base);
  cmp("norm-epsilon", saved.norm_epsilon, current.norm_epsilon);
  cmp("tie-embeddings", saved.tie_embeddings, current.tie_embeddings);
  // max-position-embeddings is not compared: RoPE has no table, so a longer context is allowed.
  return out;
}

void checkpoint_check_model(const ModelConfig& saved, const ModelConfig& current,
                            const std::string& where) {
  const std::vector<std::string> diff = checkpoint_model_diff(saved, current);
  if (diff.empty()) return;
  fail_config(
      "the checkpoint {} is of a different model: {}; run with the model flags the checkpoint "
      "was trained with, or start without --load",
      where, fmt::join(diff, "; "));
}

}  // namespace infinipipe
