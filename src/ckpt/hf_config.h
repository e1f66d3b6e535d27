// The one reader of a Hugging Face Llama config.json, whoever wrote it: infinipipe's checkpoints
// (`CheckpointReader`) and Hugging Face model folders (`HfModelReader`) read theirs here, so the
// same file gives the same model or the same error on either path.
//
// Required (a default shape never matches the weights beside the file, so a missing one is an
// error naming it, not a tensor of the wrong shape later): model_type "llama",
// num_hidden_layers, hidden_size, num_attention_heads, intermediate_size, vocab_size.
// Optional, absent or null: transformers' LlamaConfig defaults: num_key_value_heads =
// num_attention_heads, max_position_embeddings 2048, rope_theta 10000, rms_norm_eps 1e-6,
// tie_word_embeddings false, head_dim = hidden_size / num_attention_heads, hidden_act "silu",
// attention_bias, mlp_bias false, attention_dropout 0, rope_scaling null.
// Anything infinipipe cannot train exactly (another architecture, rope_scaling, biases, another
// activation, dropout, quantized weights) is refused with the reason.
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
