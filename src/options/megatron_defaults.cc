#include "options/megatron_defaults.h"

#include <algorithm>

#include <fmt/format.h>

#include "options/options.h"

namespace infinipipe::options {
namespace {

struct MegatronDefault {
  const char* option;
  const char* megatron;  // as infinipipe spells the value
  const char* why;       // why infinipipe's default differs, when it does
};

// Megatron-LM's defaults of the options both have. "required" where Megatron has none.
const std::vector<MegatronDefault>& megatron_defaults() {
  static const std::vector<MegatronDefault> t = {
      {"num-layers", "required", "a small model that trains on a CPU in seconds"},
      {"hidden-size", "required", "a small model that trains on a CPU in seconds"},
      {"num-attention-heads", "required", "a small model that trains on a CPU in seconds"},
      {"seq-length", "required", "a length EPP can slice and pack on a CPU"},
      {"vocab-size", "required",
       "the byte tokenizer's 256 bytes and end-of-document (`data prepare`)"},
      {"num-query-groups", "1",
       "0 means a key/value head per attention head; Megatron's 1 applies only with "
       "--group-query-attention, and so does infinipipe's"},
      {"ffn-hidden-size", "0", ""},
      {"max-position-embeddings", "0", ""},
      {"rotary-base", "10000", ""},
      {"norm-epsilon", "1e-05", ""},
      {"tie-embeddings", "true", ""},
      {"group-query-attention", "false", ""},
      {"init-method-std", "0.02", ""},
      {"pipeline-model-parallel-size", "1", ""},
      {"schedule", "1f1b",
       "EPP is what infinipipe is for; Megatron-LM runs 1F1B (interleaved with virtual stages)"},
      {"micro-batch-size", "required",
       "0 lets the planner choose (EPP packs chunks by tokens and needs none)"},
      {"recompute-granularity", "none",
       "adaptive recomputes only what the memory budget needs, per stage and chunk (InfiniPipe "
       "§V); with room to spare it recomputes nothing, as none"},
      {"recompute-method", "uniform", ""},
      {"recompute-num-layers", "0", ""},
      {"use-distributed-optimizer", "false", ""},
      {"global-batch-size", "required", "16 sequences: a batch a CPU trains in seconds"},
      {"train-iters", "required", "a short run"},
      {"lr", "required", "3e-4, a learning rate that trains the small default model"},
      {"min-lr", "0", ""},
      {"lr-decay-style", "linear", ""},
      {"lr-warmup-iters", "0", ""},
      {"lr-decay-iters", "0", ""},
      {"weight-decay", "0.01", ""},
      {"adam-beta1", "0.9", ""},
      {"adam-beta2", "0.999", ""},
      {"adam-eps", "1e-08", ""},
      {"clip-grad", "1", ""},
      {"optimizer", "adamw", ""},
      {"seed", "1234", ""},
      {"save-interval", "0", ""},
      {"bf16", "false", ""},
      {"split", "969,30,1",
       "a run without --split trains on every document, as before splits existed; Megatron-LM "
       "warns and holds out 3.1% (give --split 969,30,1 for its split)"},
      {"log-interval", "100", "a CPU run is short: every iteration gets its metrics line"},
      {"p2p-timeout", "600",
       "Megatron's --distributed-timeout-minutes 10 waits for NCCL; 45 s ends a hung CPU job "
       "within a minute (--distributed-timeout-minutes sets it too)"},
  };
  return t;
}

// Behaviours without an infinipipe option that differ from Megatron-LM's defaults.
const std::vector<DefaultDifference>& fixed_differences() {
  static const std::vector<DefaultDifference> t = {
      {"make-vocab-size-divisible-by", "no padding", "128 (the vocabulary is padded)",
       "the model has exactly --vocab-size rows; give a multiple if you need one"},
      {"ffn-hidden-size (when 0)", "8/3 hidden rounded up to 256", "8/3 hidden rounded down to 64",
       "Llama's rule, so Hugging Face Llama checkpoints have the same shapes"},
      {"sgd-momentum", "0", "0.9", "infinipipe's sgd is plain SGD; use adam for momentum"},
      {"num-query-groups without --group-query-attention", "used", "ignored",
       "a note says so; add --group-query-attention to write it as Megatron-LM"},
  };
  return t;
}

}  // namespace

std::vector<DefaultDifference> megatron_default_differences(const Config& cfg) {
  std::vector<DefaultDifference> out;
  for (const MegatronDefault& d : megatron_defaults()) {
    const std::string ours = option_value(cfg, d.option);
    if (ours == d.megatron) continue;
    std::string why = d.why;
    if (why.empty()) why = "set by this configuration";
    out.push_back({d.option, ours, d.megatron, why});
  }
  const auto& fixed = fixed_differences();
  out.insert(out.end(), fixed.begin(), fixed.end());
  return out;
}

std::string format_default_differences(const std::vector<DefaultDifference>& diffs) {
  size_t w_opt = 6, w_ours = 10, w_meg = 11;
  for (const DefaultDifference& d : diffs) {
    w_opt = std::max(w_opt, d.option.size());
    w_ours = std::max(w_ours, d.infinipipe.size());
    w_meg = std::max(w_meg, d.megatron.size());
  }
  std::string out = fmt::format("{:<{}}  {:<{}}  {:<{}}  {}\n", "option", w_opt, "infinipipe",
                                w_ours, "Megatron-LM", w_meg, "why");
  for (const DefaultDifference& d : diffs)
    out += fmt::format("{:<{}}  {:<{}}  {:<{}}  {}\n", d.option, w_opt, d.infinipipe, w_ours,
                       d.megatron, w_meg, d.why);
  return out;
}

}  // namespace infinipipe::options
