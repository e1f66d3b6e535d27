// The model families (llama, qwen2, qwen3, mistral): which features each has, the checks that
// keep a family and its features in agreement, and what the C++ engine cannot train.
#include <string>

#include <fmt/format.h>

#include "core/config.h"
#include "core/error.h"

namespace infinipipe {

void ModelConfig::resolve_family() {
  // Only the default is derived: a family named by config.json or --model-family stays, and a
  // disagreement with the features is then validate_family's error.
  if (family != "llama") return;
  if (qk_layernorm)
    family = "qwen3";
  else if (add_qkv_bias)
    family = "qwen2";
}

void ModelConfig::validate_family() const {
  bool known = false;
  for (const char* f : kModelFamilies) known = known || family == f;
  if (!known) fail_config("model family '{}' is not one of llama, qwen2, qwen3, mistral", family);
  // Each family's attention block as transformers builds it (modeling_<family>.py).
  const bool bias = family == "qwen2", norm = family == "qwen3";
  if (add_qkv_bias != bias)
    fail_config("model family {} {} q/k/v biases, but add-qkv-bias is {}: {}", family,
                bias ? "has" : "has no", add_qkv_bias ? "true" : "false",
                bias ? "add --add-qkv-bias" : "drop --add-qkv-bias (it makes the family qwen2)");
  if (qk_layernorm != norm)
    fail_config("model family {} {} q/k RMSNorm, but qk-layernorm is {}: {}", family,
                norm ? "has" : "has no", qk_layernorm ? "true" : "false",
                norm ? "add --qk-layernorm" : "drop --qk-layernorm (it makes the family qwen3)");
  if (sliding_window < 0)
    fail_config("sliding-window must be >= 0 (0 = full attention), got {}", sliding_window);
  // A window at least as long as every sequence masks nothing: exact full attention.
  if (sliding_window > 0 && seq_length > sliding_window)
    fail_config(
        "sliding-window attention is not honoured: train with --seq-length <= {} (the window; "
        "seq-length is {}), where the window masks nothing",
        sliding_window, seq_length);
}

std::string engine_unsupported(const ModelConfig& m) {
  if (m.add_qkv_bias) return fmt::format("q/k/v projection biases (model family {})", m.family);
  if (m.qk_layernorm) return fmt::format("q/k RMSNorm (model family {})", m.family);
  if (m.kv_channels > 0 &&
      (m.num_attention_heads <= 0 || m.hidden_size % m.num_attention_heads != 0 ||
       m.kv_channels != m.hidden_size / m.num_attention_heads))
    return fmt::format("head_dim {} x {} heads != hidden-size {}", m.kv_channels,
                       m.num_attention_heads, m.hidden_size);
  if (m.sliding_window > 0 && m.seq_length > m.sliding_window)
    return fmt::format("a sliding window of {} tokens below seq-length {}", m.sliding_window,
                       m.seq_length);
  return "";
}

std::string engine_unsupported_message(const ModelConfig& m) {
  return fmt::format(
      "the C++ engine trains the Llama architecture; {} needs the PyTorch trainer with the "
      "folder's own modelling code: python3 -m infinipipe.torch.train --hf-model DIR",
      engine_unsupported(m));
}

}  // namespace infinipipe
