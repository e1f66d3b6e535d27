// A Hugging Face Llama folder written by hand, the way transformers' save_pretrained lays it
// out, without infinipipe's writer: config.json, and model.safetensors or shards with
// model.safetensors.index.json, with F32 or BF16 tensors of seeded random values. The tests
// read it with infinipipe's loader and compare with what they wrote.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"

namespace infinipipe::testing {

struct HfTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;   // exactly representable in the folder's dtype
  std::vector<uint8_t> bytes;  // as stored in the file
};

// Llama's tensors for `m` under Hugging Face names (no lm_head when tied).
inline std::map<std::string, std::vector<int64_t>> hf_llama_shapes(const ModelConfig& m) {
  const int64_t h = m.hidden_size, f = m.ffn_size(), kv = m.kv_heads() * m.head_dim();
  std::map<std::string, std::vector<int64_t>> s = {{"model.embed_tokens.weight", {m.vocab_size, h}},
                                                   {"model.norm.weight", {h}}};
  if (!m.tie_embeddings) s["lm_head.weight"] = {m.vocab_size, h};
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    s[p + "input_layernorm.weight"] = {h};
    s[p + "post_attention_layernorm.weight"] = {h};
    s[p + "self_attn.q_proj.weight"] = {h, h};
    s[p + "self_attn.k_proj.weight"] = {kv, h};
    s[p + "self_attn.v_proj.weight"] = {kv, h};
    s[p + "self_attn.o_proj.weight"] = {h, h};
    s[p + "mlp.gate_proj.weight"] = {f, h};
    s[p + "mlp.up_proj.weight"] = {f, h};
    s[p + "mlp.down_proj.weight"] = {h, f};
  }
  return s;
}

inline nlohmann::json hf_llama_config(const ModelConfig& m) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", m.hidden_size},
          {"intermediate_size", m.ffn_size()},
          {"num_attention_heads", m.num_attention_heads},
          {"num_key_value_heads", m.kv_heads()},
          {"num_hidden_layers", m.num_layers},
          {"vocab_size", m.vocab_size},
          {"max_position_embeddings", m.max_positions()},
          {"rope_theta", m.rotary_base},
          {"rms_norm_eps", m.norm_epsilon},
          {"tie_word_embeddings", m.tie_embeddings},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"rope_scaling", nullptr},
          {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.44.0"}};
}

// Seeded values near Llama's initialisation (norms near 1), rounded to bf16 when `bf16`.
inline std::map<std::string, HfTensor> hf_random_tensors(const ModelConfig& m, bool bf16,
                                                         uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::map<std::string, HfTensor> out;
  for (const auto& [name, shape] : hf_llama_shapes(m)) {
    HfTensor t;
    t.shape = shape;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const bool norm = name.find("norm") != std::string::npos;
    for (int64_t i = 0; i < n; ++i) {
      const float v = norm ? 1.0f + normal(rng) : normal(rng);
      uint32_t bits = std::bit_cast<uint32_t>(v);
      if (bf16) {
        const uint16_t top = static_cast<uint16_t>(bits >> 16);  // truncation: any bf16 will do
        t.values.push_back(std::bit_cast<float>(static_cast<uint32_t>(top) << 16));
        t.bytes.push_back(static_cast<uint8_t>(top & 0xff));
        t.bytes.push_back(static_cast<uint8_t>(top >> 8));
      } else {
        t.values.push_back(v);
        for (int k = 0; k < 4; ++k) t.bytes.push_back(static_cast<uint8_t>(bits >> (8 * k)));
      }
    }
    out[name] = std::move(t);
  }
  return out;
}

// One safetensors file: 8-byte header length, JSON header padded with spaces, the data.
inline void hf_write_safetensors(const std::filesystem::path& path,
                                 const std::map<std::string, const HfTensor*>& tensors,
                                 const std::string& dtype) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::string data;
  for (const auto& [name, t] : tensors) {
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(t->bytes.data()), t->bytes.size());
    header[name] = {{"dtype", dtype}, {"shape", t->shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  const uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << text << data;
}

// Writes the folder: one file (shards == 1) or `shards` files with the index, round robin.
inline void hf_write_folder(const std::filesystem::path& dir, const nlohmann::json& config,
                            const std::map<std::string, HfTensor>& tensors, bool bf16, int shards) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump(2);
  std::vector<std::map<std::string, const HfTensor*>> parts(static_cast<size_t>(shards));
  size_t i = 0;
  for (const auto& [name, t] : tensors) parts[i++ % parts.size()][name] = &t;
  if (shards == 1) {
    hf_write_safetensors(dir / "model.safetensors", parts[0], bf16 ? "BF16" : "F32");
    return;
  }
  nlohmann::json map = nlohmann::json::object();
  for (int s = 0; s < shards; ++s) {
    const std::string file =
        "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    hf_write_safetensors(dir / file, parts[static_cast<size_t>(s)], bf16 ? "BF16" : "F32");
    for (const auto& [name, t] : parts[static_cast<size_t>(s)]) map[name] = file;
  }
  std::ofstream(dir / "model.safetensors.index.json")
      << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump(2);
}

}  // namespace infinipipe::testing
