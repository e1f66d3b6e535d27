#include "ckpt/checkpoint_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ckpt/hf_family.h"
#include "core/error.h"

namespace infinipipe {

nlohmann::json checkpoint_hf_config(const ModelConfig& m, const nlohmann::json& tokenizer_ids,
                                    const std::string& torch_dtype) {
  const HfFamily* family = hf_family(m.family);
  if (family == nullptr) fail_config("model family '{}' has no Hugging Face config", m.family);
  nlohmann::json hf = {
      {"architectures", {family->architecture}},
      {"model_type", family->model_type},
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
      {"attention_dropout", 0.0},
      {"initializer_range", m.init_method_std},
      {"use_cache", true},
      {"torch_dtype", torch_dtype},
  };
  // The fields of each family's config class that say "no more than the above" (transformers'
  // defaults would otherwise turn on Qwen's window or Mistral's 4096-token window).
  if (m.family == "llama") {
    hf.update({{"attention_bias", false}, {"mlp_bias", false}, {"pretraining_tp", 1}});
  } else if (m.family == "qwen2") {
    hf.update({{"use_sliding_window", false}, {"sliding_window", nullptr}});
  } else if (m.family == "qwen3") {
    hf.update({{"attention_bias", false}, {"use_sliding_window", false},
               {"sliding_window", nullptr}});
  } else if (m.family == "mistral") {
    hf["sliding_window"] = m.sliding_window > 0 ? nlohmann::json(m.sliding_window) : nullptr;
  }
  if (tokenizer_ids.is_object()) hf.update(tokenizer_ids);
  return hf;
}

nlohmann::json checkpoint_hf_generation_config(const nlohmann::json& tokenizer_ids) {
  nlohmann::json g = {{"_from_model_config", true}};
  if (tokenizer_ids.is_object()) g.update(tokenizer_ids);
  return g;
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
  cmp("model-family", saved.family, current.family);
  // head_dim follows hidden / heads unless one sets it; then it is a difference of its own.
  if (saved.kv_channels > 0 || current.kv_channels > 0)
    cmp("kv-channels (head_dim)", saved.head_dim(), current.head_dim());
  cmp("add-qkv-bias", saved.add_qkv_bias, current.add_qkv_bias);
  cmp("qk-layernorm", saved.qk_layernorm, current.qk_layernorm);
  cmp("sliding-window", saved.sliding_window, current.sliding_window);
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
