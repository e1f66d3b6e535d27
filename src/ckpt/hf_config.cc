#include "ckpt/hf_config.h"

#include <algorithm>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "ckpt/hf_family.h"
#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe {

namespace {

using Json = nlohmann::json;

// Larger than any model's sizes, small enough that products of a few stay within int64 before
// ModelConfig::validate checks the model as a whole.
constexpr int64_t kHfMaxSize = int64_t{1} << 40;
constexpr double kHfDefaultRopeTheta = 10000.0;  // every family's config class
constexpr double kHfDefaultRmsNormEps = 1e-6;

// How to fix a field of the wrong type or range, whichever path read the file.
constexpr const char* kHfFieldFix =
    "correct it in the file (it holds the fields of transformers' config class of its "
    "model_type, as save_pretrained or `infinipipe checkpoint export` writes them)";

const Json* optional_field(const Json& hf, const char* key) {
  const auto it = hf.find(key);
  return it == hf.end() || it->is_null() ? nullptr : &*it;
}

const HfFamily& family_of(const Json& hf, const std::string& path) {
  const Json* type = optional_field(hf, "model_type");
  const HfFamily* f = type && type->is_string() ? hf_family(type->get<std::string>()) : nullptr;
  if (f == nullptr) {
    fail_config(
        "{}: model_type is {}; infinipipe knows the model types {} (LlamaForCausalLM, "
        "Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM)",
        path, type ? json_brief(*type) : "missing", hf_family_names());
  }
  return *f;
}

// A field the family's config class does not have, or one infinipipe has not checked: refused,
// since what it changes would otherwise be trained or planned without it.
void refuse_unknown_fields(const Json& hf, const HfFamily& f, const std::string& path) {
  if (hf.contains("quantization_config")) {
    fail_config("{}: has a quantization_config; infinipipe reads F32, BF16 and F16 weights only",
                path);
  }
  for (const auto& [key, value] : hf.items()) {
    if (std::find(f.fields.begin(), f.fields.end(), key) != f.fields.end()) continue;
    std::string known;
    for (const std::string& k : f.fields) known += (known.empty() ? "" : ", ") + k;
    fail_config(
        "{}: field {} is not one infinipipe knows for model_type {} ({}); it may change the "
        "model, so it is refused: remove it if it is metadata. Known fields: {}",
        path, key.size() > 80 ? key.substr(0, 80) + "..." : key, f.model_type, f.config_class,
        known);
  }
}

// RoPE's base from rope_parameters (transformers 5) or rope_theta (4.x); any rope_type but
// "default" (no scaling) is refused.
double rope_theta(const Json& hf, const std::string& path) {
  const auto refuse = [&](const char* key, const Json& v) {
    fail_config(
        "{}: {} is {}; infinipipe implements plain RoPE only (rope_type \"default\", no "
        "scaling), so it would not compute this model",
        path, key, json_brief(v));
  };
  std::vector<std::pair<const char*, double>> thetas;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const Json* r = optional_field(hf, key);
    if (r == nullptr) continue;
    if (!r->is_object()) refuse(key, *r);
    for (const auto& [k, v] : r->items()) {
      if ((k == "rope_type" || k == "type") && v == "default") continue;
      if (k == "rope_theta") {
        thetas.emplace_back(
            key, json_number(v, fmt::format("{}: field {}.rope_theta", path, key), 1e-300));
        continue;
      }
      refuse(key, *r);
    }
    if (!r->contains("rope_type") && !r->contains("type") && key == std::string("rope_scaling"))
      refuse(key, *r);  // 4.x's rope_scaling names its type; without one it is not plain RoPE
  }
  if (const Json* t = optional_field(hf, "rope_theta"))
    thetas.emplace_back("rope_theta",
                        json_number(*t, fmt::format("{}: field rope_theta", path), 1e-300));
  for (const auto& [key, theta] : thetas) {
    if (theta != thetas.front().second) {
      fail_config("{}: {} gives rope_theta {} but {} gives {}; keep one of them", path,
                  thetas.front().first, thetas.front().second, key, theta);
    }
  }
  return thetas.empty() ? kHfDefaultRopeTheta : thetas.front().second;
}

// Fields whose only value infinipipe computes exactly; any other is refused with the reason.
void refuse_unsupported(const Json& hf, const HfFamily& f, const std::string& path) {
  if (const Json* a = optional_field(hf, "architectures")) {
    if (!a->is_array() || a->size() != 1 || *a->begin() != f.architecture) {
      fail_config("{}: architectures is {}; a model_type {} model is [\"{}\"]", path,
                  json_brief(*a), f.model_type, f.architecture);
    }
  }
  const auto refuse_unless = [&](const char* key, const Json& neutral, const char* why) {
    const Json* v = optional_field(hf, key);
    if (v == nullptr || *v == neutral) return;
    fail_config("{}: {} is {}, which infinipipe does not support: {}", path, key, json_brief(*v),
                why);
  };
  refuse_unless("hidden_act", "silu", "the MLP of these families is SwiGLU with SiLU");
  refuse_unless("attention_bias", false,
                "it adds biases to q/k/v and o_proj, which these families' modelling code of "
                "infinipipe's plans does not have (Qwen2's q/k/v biases come with model_type "
                "qwen2)");
  refuse_unless("mlp_bias", false, "the MLP projections have no bias");
  refuse_unless("attention_dropout", 0.0, "infinipipe trains without dropout");
  refuse_unless("pretraining_tp", 1, "the tensor-parallel slicing of pretraining_tp is not used");
  refuse_unless("use_sliding_window", false,
                "sliding-window attention is not honoured; set it false (full attention)");
  refuse_unless("use_mrope", false, "multimodal rotary embeddings are not implemented");
  if (const Json* types = optional_field(hf, "layer_types")) {
    bool full = types->is_array();
    if (full)
      for (const Json& t : *types) full = full && t == "full_attention";
    if (!full) {
      fail_config(
          "{}: layer_types is {}; infinipipe supports only \"full_attention\" layers (no "
          "sliding-window layers)",
          path, json_brief(*types));
    }
  }
  (void)rope_theta(hf, path);
}

// The fields, typed and range-checked; an Error names the field (json_read.h).
ModelConfig hf_config_fields(const Json& hf, const HfFamily& f, const std::string& path) {
  const auto where = [&](const char* key) { return fmt::format("{}: field {}", path, key); };
  const auto size = [&](const char* key) {
    const Json* v = optional_field(hf, key);
    if (v == nullptr) {
      fail_config(
          "{} lacks the field {}, which sets the shape of the weights and so has no safe "
          "default; add it to the file",
          path, key);
    }
    return json_int(*v, where(key), 1, kHfMaxSize);
  };
  ModelConfig m;
  m.family = f.model_type;
  m.add_qkv_bias = f.qkv_bias;
  m.qk_layernorm = f.qk_norm;
  m.num_layers = size("num_hidden_layers");
  m.hidden_size = size("hidden_size");
  m.num_attention_heads = size("num_attention_heads");
  m.ffn_hidden_size = size("intermediate_size");
  m.vocab_size = size("vocab_size");
  const Json* kv = optional_field(hf, "num_key_value_heads");
  m.num_query_groups = kv ? json_int(*kv, where("num_key_value_heads"), 1, m.num_attention_heads)
                       : f.default_kv_heads > 0 ? f.default_kv_heads
                                                : m.num_attention_heads;
  // head_dim is stored only where it is not hidden / heads (ModelConfig::kv_channels).
  const Json* hd = optional_field(hf, "head_dim");
  const int64_t head_dim =
      hd ? json_int(*hd, where("head_dim"), 1, kHfMaxSize) : f.default_head_dim;
  const bool derived = m.hidden_size % m.num_attention_heads == 0 &&
                       head_dim == m.hidden_size / m.num_attention_heads;
  m.kv_channels = head_dim == 0 || derived ? 0 : head_dim;
  const Json* pos = optional_field(hf, "max_position_embeddings");
  m.max_position_embeddings = pos ? json_int(*pos, where("max_position_embeddings"), 1, kHfMaxSize)
                                  : f.default_max_positions;
  m.rotary_base = rope_theta(hf, path);
  const Json* eps = optional_field(hf, "rms_norm_eps");
  m.norm_epsilon = eps ? json_number(*eps, where("rms_norm_eps"), 1e-300) : kHfDefaultRmsNormEps;
  const Json* tie = optional_field(hf, "tie_word_embeddings");
  m.tie_embeddings = tie && json_bool(*tie, where("tie_word_embeddings"));
  // Mistral's window applies always (null = none); Qwen's only with use_sliding_window, refused.
  const auto window = hf.find("sliding_window");
  if (window != hf.end() && !window->is_null()) {
    const int64_t w = json_int(*window, where("sliding_window"), 1, kHfMaxSize);
    if (f.default_sliding_window > 0) m.sliding_window = w;
  } else if (window == hf.end()) {
    m.sliding_window = f.default_sliding_window;
  }
  if (const Json* layers = optional_field(hf, "max_window_layers"))
    (void)json_int(*layers, where("max_window_layers"), 0, kHfMaxSize);
  if (const Json* types = optional_field(hf, "layer_types");
      types && static_cast<int64_t>(types->size()) != m.num_layers) {
    fail_config("{}: layer_types has {} entries for num_hidden_layers {}; give one per layer", path,
                types->size(), m.num_layers);
  }
  return m;
}

}  // namespace

ModelConfig hf_config_to_model(const Json& hf, const std::string& path) {
  if (!hf.is_object()) {
    fail_config("{}: not a JSON object, so not a Hugging Face config; {}", path, kHfFieldFix);
  }
  const HfFamily& family = family_of(hf, path);
  ModelConfig m;
  try {
    refuse_unknown_fields(hf, family, path);
    refuse_unsupported(hf, family, path);
    m = hf_config_fields(hf, family, path);
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {  // a field of the wrong type or range; the message names it
    fail_config("{}; {}", e.what(), kHfFieldFix);
  }
  try {
    // config.json has no sequence length: the longest it describes (a sliding window limits
    // what infinipipe trains exactly to the window).
    ModelConfig check = m;
    check.seq_length = m.sliding_window > 0 ? std::min(m.max_position_embeddings, m.sliding_window)
                                            : m.max_position_embeddings;
    check.validate();
  } catch (const Error& e) {
    fail_config("{}: the model it describes is invalid ({}); {}", path, e.what(), kHfFieldFix);
  }
  return m;
}

}  // namespace infinipipe
