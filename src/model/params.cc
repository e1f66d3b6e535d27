#include "model/params.h"

#include <cmath>

#include "core/error.h"
#include "model/parallel.h"

namespace infinipipe {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t hash_name(const std::string& name) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// Uniform in (0, 1], from the top 53 bits.
double to_unit(uint64_t r) {
  return (static_cast<double>(r >> 11) + 1.0) * 0x1.0p-53;
}

}  // namespace

double param_init_std(const ModelConfig& cfg, const std::string& name) {
  // Megatron-LM's output_layer_init_method: the projections that write into the residual stream
  // get std / sqrt(2 * num_layers), so the residual's variance does not grow with depth.
  auto ends_with = [&](const char* tail) {
    const std::string t = tail;
    return name.size() >= t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
  };
  if (ends_with("self_attn.o_proj.weight") || ends_with("mlp.down_proj.weight"))
    return cfg.init_method_std / std::sqrt(2.0 * static_cast<double>(cfg.num_layers));
  return cfg.init_method_std;
}

void param_init(float* out, int64_t numel, uint64_t seed, const std::string& name, bool is_norm,
                double std) {
  if (is_norm) {
    for (int64_t i = 0; i < numel; ++i) out[i] = 1.0f;
    return;
  }
  // Counter-based: element i depends only on (seed, name, i), so any layout gets equal values.
  const uint64_t key = splitmix64(seed ^ splitmix64(hash_name(name)));
#pragma omp parallel for schedule(static) if (numel >= kOmpMinWork)
  for (int64_t pair = 0; pair < (numel + 1) / 2; ++pair) {
    double u1 = to_unit(splitmix64(key + 2 * static_cast<uint64_t>(pair)));
    double u2 = to_unit(splitmix64(key + 2 * static_cast<uint64_t>(pair) + 1));
    double r = std::sqrt(-2.0 * std::log(u1));
    double a = 2.0 * M_PI * u2;
    out[2 * pair] = static_cast<float>(std * r * std::cos(a));
    if (2 * pair + 1 < numel) out[2 * pair + 1] = static_cast<float>(std * r * std::sin(a));
  }
}

Param* ModelParams::add(const std::string& name, std::vector<int64_t> shape, bool is_norm) {
  auto p = std::make_unique<Param>();
  p->name = name;
  p->value = Tensor(tracker_, MemCategory::mem_weights, shape, false);
  p->grad = Tensor(tracker_, MemCategory::mem_grads, shape, true);
  param_init(p->value.data(), p->value.numel(), seed_, name, is_norm, param_init_std(cfg_, name));
  all_.push_back(std::move(p));
  return all_.back().get();
}

ModelParams::ModelParams(const ModelConfig& cfg, StageRange range, uint64_t seed,
                         MemoryTracker& tracker)
    : cfg_(cfg), range_(range), seed_(seed), tracker_(tracker) {
  if (range.first_layer < 0 || range.num_layers < 0 ||
      range.first_layer + range.num_layers > cfg.num_layers) {
    fail_config("stage layers [{}, {}) are outside the model's {} layers; fix the stage split",
                range.first_layer, range.first_layer + range.num_layers, cfg.num_layers);
  }
  // Every engine model (training, generate, init_params, reference_step) is built here.
  if (!engine_unsupported(cfg).empty()) fail_config("{}", engine_unsupported_message(cfg));
  if (cfg.hidden_size % cfg.num_attention_heads != 0 ||
      cfg.num_attention_heads % cfg.kv_heads() != 0 || cfg.head_dim() % 2 != 0) {
    fail_config(
        "model: hidden size {} must divide into {} heads of even size, and the heads into {} "
        "query groups",
        cfg.hidden_size, cfg.num_attention_heads, cfg.kv_heads());
  }
  const int64_t C = cfg.hidden_size, V = cfg.vocab_size, F = cfg.ffn_size();
  const int64_t Q = cfg.num_attention_heads * cfg.head_dim(), KV = cfg.kv_heads() * cfg.head_dim();
  const bool embed_here = range.has_embedding || (range.has_lm_head && cfg.tie_embeddings);
  if (embed_here) embedding_ = add("model.embed_tokens.weight", {V, C}, false);
  for (int64_t i = 0; i < range.num_layers; ++i) {
    const std::string p = fmt::format("model.layers.{}.", range.first_layer + i);
    LayerParams l{};
    l.layer = range.first_layer + i;
    l.input_norm = add(p + "input_layernorm.weight", {C}, true);
    l.wq = add(p + "self_attn.q_proj.weight", {Q, C}, false);
    l.wk = add(p + "self_attn.k_proj.weight", {KV, C}, false);
    l.wv = add(p + "self_attn.v_proj.weight", {KV, C}, false);
    l.wo = add(p + "self_attn.o_proj.weight", {C, Q}, false);
    l.post_norm = add(p + "post_attention_layernorm.weight", {C}, true);
    l.wgate = add(p + "mlp.gate_proj.weight", {F, C}, false);
    l.wup = add(p + "mlp.up_proj.weight", {F, C}, false);
    l.wdown = add(p + "mlp.down_proj.weight", {C, F}, false);
    layers_.push_back(l);
  }
  if (range.has_lm_head) {
    final_norm_ = add("model.norm.weight", {C}, true);
    lm_head_ = cfg.tie_embeddings ? embedding_ : add("lm_head.weight", {V, C}, false);
  }
}

std::vector<ParamRef> ModelParams::params() {
  std::vector<ParamRef> refs;
  refs.reserve(all_.size());
  for (auto& p : all_) {
    refs.push_back({p->name, p->value.shape(), p->value.data(), p->grad.data(), p->value.numel()});
  }
  return refs;
}

void ModelParams::grads_zero() {
  for (auto& p : all_) p->grad.fill_zero();
}

int64_t ModelParams::numel() const {
  int64_t n = 0;
  for (const auto& p : all_) n += p->value.numel();
  return n;
}

}  // namespace infinipipe
