// The one reader of a Hugging Face config.json, whoever wrote it: infinipipe's checkpoints
// (`CheckpointReader`) and Hugging Face model folders (`HfModelReader`) read theirs here, so the
// same file gives the same model or the same error on either path.
//
// model_type llama, qwen2, qwen3 or mistral (ckpt/hf_family.h). Required (a default shape never
// matches the weights beside the file, so a missing one is an error naming it, not a tensor of
// the wrong shape later): num_hidden_layers, hidden_size, num_attention_heads,
// intermediate_size, vocab_size. Optional, absent or null: the defaults of the family's config
// class in transformers 5.23 (num_key_value_heads = heads for llama, 32 for qwen2/qwen3, 8 for
// mistral; head_dim = hidden/heads, 128 for qwen3; max_position_embeddings 2048, 32768, 32768,
// 131072; rope_theta 10000; rms_norm_eps 1e-6; tie_word_embeddings false; mistral's
// sliding_window 4096, null = none). RoPE is read from transformers 5's rope_parameters
// {"rope_theta", "rope_type": "default"} or 4.x's rope_theta with rope_scaling null.
// Refused, each with one ConfigError naming the field and what is supported: any rope_type but
// "default", use_sliding_window true, layer_types other than "full_attention", attention_bias
// true, mlp_bias true, hidden_act other than silu, attention_dropout != 0, pretraining_tp != 1,
// use_mrope true, quantization_config, and any field the family's table does not list.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/config.h"

namespace infinipipe {

// The file is input: every refusal is a ConfigError naming `path`, the field and how to fix it.
// Values are range-checked before use (the file may be hostile). seq_length is left at its
// default (config.json has none); max_position_embeddings is set, and the model is validated at
// that length, the longest it describes.
ModelConfig hf_config_to_model(const nlohmann::json& hf, const std::string& path);

}  // namespace infinipipe
