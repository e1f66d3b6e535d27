#include "options/megatron_defaults.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/parallel_auto.h"
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

std::vector<SemanticDifference> megatron_semantic_differences(const Config& cfg) {
  const int64_t seq = cfg.model.seq_length;
  const bool split = cfg.training.long_documents == LongDocuments::split;
  const std::string sample =
      split ? fmt::format(
                  "one document, or with --long-documents split one piece of at most {} "
                  "tokens of a longer document (the pieces are consecutive, each its own "
                  "sample)",
                  seq)
            : fmt::format(
                  "one document, truncated to its first --seq-length {} tokens "
                  "(--long-documents truncate, the paper's protocol)",
                  seq);
  return {
      {"a sample", sample,
       fmt::format("exactly --seq-length {} tokens cut from the documents concatenated with "
                   "end-of-document tokens; no token is dropped",
                   seq),
       split ? "no token is dropped; samples are of any length up to --seq-length and are never "
               "concatenated (EPP packs and slices them per batch)"
             : "tokens past --seq-length are never trained on; train and `data stats` say how "
               "many; --long-documents split keeps them"},
      {"--global-batch-size",
       fmt::format("{} samples as above: documents of any length up to {} tokens",
                   cfg.training.global_batch_size, seq),
       fmt::format("{} samples of exactly {} tokens", cfg.training.global_batch_size, seq),
       "the tokens of an iteration vary with the documents drawn; for Megatron's tokens per "
       "iteration raise --global-batch-size by seq-length / mean document length (`infinipipe "
       "data stats --seq-length N` gives the mean)"},
      {"--train-samples, --lr-warmup-samples, --lr-decay-samples", "samples as above (documents)",
       "samples of exactly seq-length tokens",
       "the same numbers cover fewer tokens when documents are shorter than --seq-length; "
       "iterations = train-samples / global-batch-size in both"},
      {"attention mask", "reset at every document boundary: a document never attends to another",
       "causal over the whole sample, across documents (--reset-attention-mask off)",
       "as Megatron-LM with --reset-attention-mask (accepted, and the only choice here)"},
      {"position ids",
       split ? "restart at 0 in every sample, so in every piece of a split document"
             : "restart at 0 in every document",
       "0 .. seq-length-1 over the sample, across documents (--reset-position-ids off)",
       "as Megatron-LM with --reset-position-ids (accepted, and the only choice here)"},
      {"loss", "mean over every predicted token of the global batch",
       "mean per micro-batch, averaged over the micro-batches (--calculate-per-token-loss off)",
       "as Megatron-LM with --calculate-per-token-loss (accepted, and the only choice here); "
       "with variable-length samples a long document weighs by its tokens"},
      {"data-parallel-size",
       fmt::format("{} here; train without --data-parallel-size: processes / (pp x "
                   "ulysses-degree)",
                   cfg.parallel.data_parallel == kAutoDegree
                       ? std::string("auto")
                       : std::to_string(cfg.parallel.data_parallel)),
       "processes / (tp x pp x cp), never given",
       "the same rule (no tensor or context parallelism here); a world the other degrees do not "
       "divide is refused with the sizes that fit"},
  };
}

std::string format_semantic_differences(const std::vector<SemanticDifference>& diffs) {
  std::string out = "semantics that differ from Megatron-LM's defaults:\n";
  for (const SemanticDifference& d : diffs) {
    out += fmt::format("\n{}\n  infinipipe:  {}\n  Megatron-LM: {}\n  so:          {}\n", d.subject,
                       d.infinipipe, d.megatron, d.consequence);
  }
  return out;
}

}  // namespace infinipipe::options
