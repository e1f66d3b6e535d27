#include "ckpt/hf_family.h"

namespace infinipipe {
namespace {

// What every family's config.json may carry besides its shape: metadata transformers writes
// (save_pretrained of 4.x and 5.x) and real hub configs carry; none changes the maths.
const std::vector<std::string> kMetadata = {
    "architectures", "model_type",    "transformers_version", "torch_dtype",
    "dtype",         "_name_or_path", "bos_token_id",         "eos_token_id",
    "pad_token_id",  "use_cache",     "initializer_range",    "tie_word_embeddings"};

// The shape and the rotary/attention fields all four families share.
const std::vector<std::string> kDecoder = {
    "vocab_size",        "hidden_size",         "intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
    "head_dim",          "hidden_act",          "max_position_embeddings",
    "rms_norm_eps",      "rope_theta",          "rope_scaling",
    "rope_parameters",   "attention_dropout"};

std::vector<std::string> fields(std::initializer_list<const char*> own) {
  std::vector<std::string> out = kMetadata;
  out.insert(out.end(), kDecoder.begin(), kDecoder.end());
  out.insert(out.end(), own.begin(), own.end());
  return out;
}

const std::vector<HfFamily>& families() {
  // Defaults: LlamaConfig, Qwen2Config, Qwen3Config, MistralConfig of transformers 5.23.
  static const std::vector<HfFamily> t = {
      {"llama", "LlamaForCausalLM", "LlamaConfig", 0, 0, 2048, 0, false, false,
       fields({"attention_bias", "mlp_bias", "pretraining_tp"})},
      {"qwen2", "Qwen2ForCausalLM", "Qwen2Config", 32, 0, 32768, 0, true, false,
       fields({"use_sliding_window", "sliding_window", "max_window_layers", "layer_types",
               "use_mrope"})},
      {"qwen3", "Qwen3ForCausalLM", "Qwen3Config", 32, 128, 32768, 0, false, true,
       fields({"attention_bias", "use_sliding_window", "sliding_window", "max_window_layers",
               "layer_types"})},
      {"mistral", "MistralForCausalLM", "MistralConfig", 8, 0, 4096 * 32, 4096, false, false,
       fields({"sliding_window"})},
  };
  return t;
}

}  // namespace

const HfFamily* hf_family(const std::string& model_type) {
  for (const HfFamily& f : families())
    if (model_type == f.model_type) return &f;
  return nullptr;
}

std::string hf_family_names() {
  std::string out;
  for (const HfFamily& f : families()) out += (out.empty() ? "" : ", ") + std::string(f.model_type);
  return out;
}

}  // namespace infinipipe
