#include "ckpt/hf_config.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe {

namespace {

using Json = nlohmann::json;

// Larger than any model's sizes, small enough that products of a few stay within int64 before
// ModelConfig::validate checks the model as a whole.
constexpr int64_t kHfMaxSize = int64_t{1} << 40;

// LlamaConfig's defaults (transformers/models/llama/configuration_llama.py) for optional fields.
constexpr int64_t kHfDefaultMaxPositions = 2048;
constexpr double kHfDefaultRopeTheta = 10000.0;
constexpr double kHfDefaultRmsNormEps = 1e-6;

// How to fix a field of the wrong type or range, whichever path read the file.
constexpr const char* kHfFieldFix =
    "correct it in the file (it holds transformers' LlamaConfig fields, as save_pretrained or "
    "`infinipipe checkpoint export` writes them)";

// Fields whose only value infinipipe computes exactly; any other is refused with the reason.
void refuse_unsupported(const Json& hf, const std::string& path) {
  const auto type = hf.find("model_type");
  if (type == hf.end() || !type->is_string() || *type != "llama") {
    fail_config("{}: model_type is {}, not \"llama\"; infinipipe trains Llama models only", path,
                type == hf.end() ? "missing" : json_brief(*type));
  }
  if (const auto a = hf.find("architectures"); a != hf.end() && !a->is_null()) {
    if (!a->is_array() || a->size() != 1 || *a->begin() != "LlamaForCausalLM") {
      fail_config("{}: architectures is {}; infinipipe trains LlamaForCausalLM only", path,
                  json_brief(*a));
    }
  }
  const auto refuse_unless = [&](const char* key, const Json& neutral, const char* why) {
    const auto it = hf.find(key);
    if (it == hf.end() || it->is_null() || *it == neutral) return;
    fail_config("{}: {} is {}, which infinipipe does not support: {}", path, key, json_brief(*it),
                why);
  };
  refuse_unless("hidden_act", "silu", "Llama's MLP is SwiGLU with SiLU");
  refuse_unless("attention_bias", false, "infinipipe's attention projections have no bias");
  refuse_unless("mlp_bias", false, "infinipipe's MLP projections have no bias");
  refuse_unless("attention_dropout", 0.0, "infinipipe trains without dropout");
  if (const auto r = hf.find("rope_scaling"); r != hf.end() && !r->is_null()) {
    const bool plain = r->is_object() && r->size() == 1 && r->contains("rope_type") &&
                       (*r)["rope_type"] == "default";
    if (!plain) {
      fail_config(
          "{}: rope_scaling is {}; infinipipe implements plain RoPE only (rope_scaling null), "
          "so it would not compute this model",
          path, json_brief(*r));
    }
  }
  if (hf.contains("quantization_config")) {
    fail_config("{}: has a quantization_config; infinipipe reads F32, BF16 and F16 weights only",
                path);
  }
}

// The fields, typed and range-checked; an Error names the field (json_read.h).
ModelConfig hf_config_fields(const Json& hf, const std::string& path) {
  const auto where = [&](const char* key) { return fmt::format("{}: field {}", path, key); };
  const auto size = [&](const char* key) {
    const auto it = hf.find(key);
    if (it == hf.end() || it->is_null()) {
      fail_config(
          "{} lacks the field {}, which sets the shape of the weights and so has no safe "
          "default; add it to the file",
          path, key);
    }
    return json_int(*it, where(key), 1, kHfMaxSize);
  };
  const auto optional = [&](const char* key) -> const Json* {
    const auto it = hf.find(key);
    return it == hf.end() || it->is_null() ? nullptr : &*it;
  };
  ModelConfig m;
  m.num_layers = size("num_hidden_layers");
  m.hidden_size = size("hidden_size");
  m.num_attention_heads = size("num_attention_heads");
  m.ffn_hidden_size = size("intermediate_size");
  m.vocab_size = size("vocab_size");
  const Json* kv = optional("num_key_value_heads");
  m.num_query_groups = kv ? json_int(*kv, where("num_key_value_heads"), 1, m.num_attention_heads)
                          : m.num_attention_heads;
  const Json* pos = optional("max_position_embeddings");
  m.max_position_embeddings = pos ? json_int(*pos, where("max_position_embeddings"), 1, kHfMaxSize)
                                  : kHfDefaultMaxPositions;
  const Json* theta = optional("rope_theta");
  m.rotary_base = theta ? json_number(*theta, where("rope_theta"), 1e-300) : kHfDefaultRopeTheta;
  const Json* eps = optional("rms_norm_eps");
  m.norm_epsilon = eps ? json_number(*eps, where("rms_norm_eps"), 1e-300) : kHfDefaultRmsNormEps;
  const Json* tie = optional("tie_word_embeddings");
  m.tie_embeddings = tie && json_bool(*tie, where("tie_word_embeddings"));
  return m;
}

// head_dim is redundant in a Llama infinipipe trains: it must be what the sizes imply.
void hf_config_head_dim_check(const Json& hf, const ModelConfig& m, const std::string& path) {
  const auto it = hf.find("head_dim");
  if (it == hf.end() || it->is_null()) return;
  int64_t head_dim = 0;
  try {
    head_dim = json_int(*it, fmt::format("{}: field head_dim", path), 1, kHfMaxSize);
  } catch (const Error& e) {
    fail_config("{}; {}", e.what(), kHfFieldFix);
  }
  if (head_dim * m.num_attention_heads != m.hidden_size) {
    fail_config(
        "{}: head_dim {} times num_attention_heads {} is not hidden_size {}; infinipipe's heads "
        "split the hidden size: remove head_dim or make it hidden_size / num_attention_heads",
        path, head_dim, m.num_attention_heads, m.hidden_size);
  }
}

}  // namespace

ModelConfig hf_config_to_model(const Json& hf, const std::string& path) {
  if (!hf.is_object()) {
    fail_config("{}: not a JSON object, so not a Hugging Face config; {}", path, kHfFieldFix);
  }
  refuse_unsupported(hf, path);
  ModelConfig m;
  try {
    m = hf_config_fields(hf, path);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {  // a field of the wrong type or range; the message names it
    fail_config("{}; {}", e.what(), kHfFieldFix);
  }
  try {
    ModelConfig check = m;  // config.json has no sequence length: the longest it describes
    check.seq_length = m.max_position_embeddings;
    check.validate();
  } catch (const Error& e) {
    fail_config("{}: the model it describes is invalid ({}); {}", path, e.what(), kHfFieldFix);
  }
  hf_config_head_dim_check(hf, m, path);
  return m;
}

}  // namespace infinipipe
