// Every tensor of a model as transformers names and shapes it (modeling_<family>.py): what a
// Hugging Face folder or an infinipipe checkpoint of that model holds.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"

namespace infinipipe {

// name -> shape, e.g. "model.layers.0.self_attn.q_proj.bias" -> {heads * head_dim} (qwen2),
// "model.layers.0.self_attn.q_norm.weight" -> {head_dim} (qwen3); lm_head.weight only untied.
std::map<std::string, std::vector<int64_t>> hf_model_tensors(const ModelConfig& m);

}  // namespace infinipipe
