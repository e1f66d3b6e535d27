#include "ckpt/checkpoint_config.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe {

nlohmann::json checkpoint_hf_config(const ModelConfig& m, const nlohmann::json& tokenizer_ids,
                                    const std::string& torch_dtype) {
  nlohmann::json hf = {
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
      {"initializer_range", m.init_method_std},
      {"pretraining_tp", 1},
      {"use_cache", true},
      {"torch_dtype", torch_dtype},
  };
  if (tokenizer_ids.is_object()) hf.update(tokenizer_ids);
  return hf;
}

nlohmann::json checkpoint_hf_generation_config(const nlohmann::json& tokenizer_ids) {
  nlohmann::json g = {{"_from_model_config", true}};
  if (tokenizer_ids.is_object()) g.update(tokenizer_ids);
  return g;
}

ModelConfig checkpoint_model_from_hf(const nlohmann::json& hf, const std::string& path) {
  if (!hf.is_object()) fail("{}: not a JSON object; the checkpoint is damaged", path);
  const auto where = [&](const char* key) {
    return fmt::format("{}: field {} (the checkpoint is damaged)", path, key);
  };
  // Sizes are integers; their products are checked by ModelConfig::validate.
  const auto size = [&](const char* key) {
    return json_int(json_field(hf, key, path), where(key), 0, INT64_MAX);
  };
  const auto number = [&](const char* key) {
    return json_number(json_field(hf, key, path), where(key));
  };
  const auto type = hf.find("model_type");
  if (type == hf.end() || !type->is_string() || *type != "llama") {
    fail("{}: model_type is not \"llama\"; this is not an infinipipe/Llama checkpoint", path);
  }
  ModelConfig m;
  m.num_layers = size("num_hidden_layers");
  m.hidden_size = size("hidden_size");
  m.num_attention_heads = size("num_attention_heads");
  m.num_query_groups = size("num_key_value_heads");
  m.ffn_hidden_size = size("intermediate_size");
  m.vocab_size = size("vocab_size");
  m.max_position_embeddings = size("max_position_embeddings");
  m.rotary_base = number("rope_theta");
  m.norm_epsilon = number("rms_norm_eps");
  const auto tie = hf.find("tie_word_embeddings");
  m.tie_embeddings = tie != hf.end() && json_bool(*tie, where("tie_word_embeddings"));
  try {
    ModelConfig check = m;  // config.json has no seq-length; its positions bound it
    check.seq_length = std::max<int64_t>(1, m.max_position_embeddings);
    check.validate();
  } catch (const Error& e) {
    fail("{}: the model it describes is invalid ({}); the checkpoint is damaged", path, e.what());
  }
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
