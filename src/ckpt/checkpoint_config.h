// The model description saved with a checkpoint: the Hugging Face config of its family
// (LlamaConfig, Qwen2Config, Qwen3Config, MistralConfig as config.json), so
// `transformers` can load the weights (read back by hf_config_to_model, ckpt/hf_config.h), and
// the comparison that refuses a checkpoint of another model shape with a message naming every
// difference.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"

namespace infinipipe {

// config.json of the model's family (LlamaForCausalLM, Qwen2ForCausalLM, ...) of `torch_dtype`; with a tokenizer recorded, its
// bos_token_id / eos_token_id (null when it has none).
nlohmann::json checkpoint_hf_config(const ModelConfig& model,
                                    const nlohmann::json& tokenizer_ids = nullptr,
                                    const std::string& torch_dtype = "float32");
// generation_config.json: the tokenizer's bos/eos ids ({"bos_token_id", "eos_token_id"}).
nlohmann::json checkpoint_hf_generation_config(const nlohmann::json& tokenizer_ids);
// One line per field that changes the weights or the maths, e.g.
// "checkpoint has hidden-size 512, this run has 256". Empty when the models agree.
std::vector<std::string> checkpoint_model_diff(const ModelConfig& saved,
                                               const ModelConfig& current);
// ConfigError listing the differences (and how to fix them) when there are any.
void checkpoint_check_model(const ModelConfig& saved, const ModelConfig& current,
                            const std::string& where);

}  // namespace infinipipe
