// A Hugging Face Llama config.json read as infinipipe's model: the fields LlamaConfig defines,
// with LlamaConfig's defaults for the optional ones, and a refusal naming the field and the
// reason for anything infinipipe cannot train exactly (another architecture, rope_scaling,
// biases, another activation, dropout, quantized weights).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/config.h"

namespace infinipipe {

// ConfigError naming `path` and the field when the config is not a Llama infinipipe trains.
// seq_length is left at its default (config.json has none); max_position_embeddings is set.
ModelConfig hf_config_to_model(const nlohmann::json& hf, const std::string& path);

}  // namespace infinipipe
