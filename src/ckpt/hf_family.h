// The Hugging Face model families infinipipe plans (and the PyTorch trainer trains with their own
// modelling code): per config.json model_type, transformers' class names, the defaults its config
// class gives absent fields (transformers 5.23, configuration_<family>.py), and every field the
// config reader knows; any other field is refused (ckpt/hf_config.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace infinipipe {

struct HfFamily {
  const char* model_type;    // "qwen3"
  const char* architecture;  // "Qwen3ForCausalLM"
  const char* config_class;  // "Qwen3Config"
  // Defaults of absent or null fields; 0 = derived (kv heads = heads, head_dim = hidden/heads).
  int64_t default_kv_heads;
  int64_t default_head_dim;
  int64_t default_max_positions;
  int64_t default_sliding_window;   // mistral's 4096; 0 = none
  bool qkv_bias;                    // q/k/v projections have biases (qwen2)
  bool qk_norm;                     // q_norm / k_norm over head_dim (qwen3)
  std::vector<std::string> fields;  // the fields of its config class the reader knows
};

// nullptr for a model_type infinipipe does not know.
const HfFamily* hf_family(const std::string& model_type);
// "llama, qwen2, qwen3, mistral"
std::string hf_family_names();

}  // namespace infinipipe
