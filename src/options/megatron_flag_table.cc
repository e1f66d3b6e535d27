// The classes of Megatron-LM's options (core_v0.15.0 arguments.py). Supported options are not
// listed: they are the option specs of options.cc. tests/cli/test_megatron_flags.cc checks
// that every name of arguments.py falls in exactly one class.
#include <cmath>
#include <string>

#include "options/megatron_flags.h"

namespace infinipipe::options {
namespace {

bool as_number(const std::string& v, double& out) {
  size_t pos = 0;
  try {
    out = std::stod(v, &pos);
  } catch (...) {
    return false;
  }
  return pos == v.size();
}

// Megatron pads the vocabulary to a multiple of this (times tp = 1): neutral when it divides.
bool vocab_divisor_ok(const std::string& v, const Config& c) {
  double x = 0;
  return as_number(v, x) && x >= 1 && x == std::floor(x) &&
         c.model.vocab_size % static_cast<int64_t>(x) == 0;
}
// With tensor-model-parallel-size 1 Megatron-LM turns sequence parallelism off itself.
bool any_value_ok(const std::string&, const Config&) {
  return true;
}
bool embedding_std_ok(const std::string& v, const Config& c) {
  double x = 0;
  return as_number(v, x) && x == c.model.init_method_std;
}

const char* kNoTp = "infinipipe has no tensor parallelism; use pipeline-model-parallel-size and "
                    "ulysses-degree";
const char* kLlama = "infinipipe trains the Llama architecture only";
const char* kDense = "infinipipe trains dense Llama models only (no mixture of experts)";
const char* kFp32 = "CPU training computes in fp32; --bf16 plans bf16 for the GPU presets";

}  // namespace

const std::vector<NeutralFlag>& megatron_neutral_flags() {
  static const std::vector<NeutralFlag> t = {
      {"tensor-model-parallel-size", "1", kNoTp},
      {"model-parallel-size", "1", kNoTp},
      {"context-parallel-size", "1",
       "infinipipe slices long sequences through the pipeline instead (EPP, per batch); remove it"},
      {"expert-model-parallel-size", "1", kDense},
      {"expert-tensor-parallel-size", "1", kDense},
      {"num-experts", "0", kDense},
      {"sequence-parallel", "any value (tensor-model-parallel-size is 1, so Megatron-LM turns it off)",
       kNoTp, any_value_ok},
      {"distribute-saved-activations", "false", kNoTp},
      {"fp16", "false", "use --bf16; " + std::string(kFp32)},
      {"fp16-lm-cross-entropy", "false", kFp32},
      {"apply-query-key-layer-scaling", "false", "it only matters for fp16, which is refused"},
      {"position-embedding-type", "rope", "Llama uses rotary position embeddings only"},
      {"use-rotary-position-embeddings", "true", "Llama uses rotary position embeddings only"},
      {"no-position-embedding", "true", "Llama has no learned position embeddings"},
      {"rotary-percent", "1.0", "RoPE rotates every channel of a head here"},
      {"rotary-interleaved", "false", "RoPE rotates the two halves of a head (Llama's layout)"},
      {"rotary-seq-len-interpolation-factor", "1", "RoPE positions are not interpolated here"},
      {"use-rope-scaling", "false", "Llama 3.1 RoPE scaling is not implemented"},
      {"rope-type", "rope", "only plain RoPE is implemented (no YaRN)"},
      {"normalization", "RMSNorm", "Llama uses RMSNorm only"},
      {"swiglu", "true", "Llama's MLP is SwiGLU"},
      {"openai-gelu", "false", "Llama's MLP is SwiGLU"},
      {"squared-relu", "false", "Llama's MLP is SwiGLU"},
      {"quick-geglu", "false", "Llama's MLP is SwiGLU"},
      {"glu-linear-offset", "0", "Llama's SwiGLU has no offset"},
      {"disable-bias-linear", "true", "Llama's linear layers have no bias"},
      {"apply-residual-connection-post-layernorm", "false", "Llama normalises before each block"},
      {"make-vocab-size-divisible-by", "a divisor of vocab-size (no padding)",
       "the vocabulary is not padded here; give a --vocab-size that is already a multiple",
       vocab_divisor_ok},
      {"attention-dropout", "0.0", "there is no dropout (Llama pre-training uses none)"},
      {"hidden-dropout", "0.0", "there is no dropout (Llama pre-training uses none)"},
      {"softmax-type", "vanilla", "attention uses the plain softmax"},
      {"multi-latent-attention", "false", kLlama},
      {"mtp-num-layers", "0", "multi-token prediction is not implemented"},
      {"use-mcore-models", "true", "there is one model implementation"},
      {"use-legacy-models", "false", "there is one model implementation"},
      {"use-flash-attn", "true", "attention is always blockwise (flash style)"},
      {"calculate-per-token-loss", "true",
       "the loss is always the mean over every predicted token of the global batch"},
      {"reset-position-ids", "true", "every document is its own sequence with positions from 0"},
      {"reset-attention-mask", "true", "a document never attends to another one"},
      {"eod-mask-loss", "false", "the loss covers every predicted token of a document"},
      {"account-for-embedding-in-pipeline-split", "true",
       "the planner always weighs the embedding in the layer split"},
      {"account-for-loss-in-pipeline-split", "true",
       "the planner always weighs the LM head and loss in the layer split"},
      {"init-method-xavier-uniform", "false", "weights are initialised normal(0, init-method-std)"},
      {"embedding-init-method-std", "the value of init-method-std",
       "the embedding is initialised with init-method-std", embedding_std_ok},
      {"data-parallel-random-init", "false", "every replica starts from the same weights"},
      {"sgd-momentum", "0", "infinipipe's sgd has no momentum; use --optimizer adam"},
      {"weight-decay-incr-style", "constant", "weight decay is constant over training"},
      {"lr-warmup-init", "0", "warm-up starts from a learning rate of 0"},
      {"rerun-mode", "disabled", "there is no rerun state machine"},
      {"decrease-batch-size-if-needed", "false", "the global batch size is fixed"},
  };
  return t;
}

const std::vector<FlagGroup>& megatron_irrelevant_flags() {
  static const std::vector<FlagGroup> t = {
      {"a GPU kernel fusion switch; the CPU kernels here are fixed",
       {"no-masked-softmax-fusion", "no-bias-gelu-fusion", "no-bias-swiglu-fusion",
        "use-fused-weighted-squared-relu", "no-bias-dropout-fusion", "no-rope-fusion",
        "cross-entropy-loss-fusion", "cross-entropy-fusion-impl", "no-persist-layer-norm",
        "no-gradient-accumulation-fusion", "no-gradient-reduce-div-fusion", "attention-backend",
        "transformer-impl", "use-te-activation-func", "disable-bf16-reduced-precision-matmul"}},
      {"a GPU memory, stream or Python setting without effect on CPU",
       {"manual-gc", "manual-gc-interval", "no-manual-gc-eval", "empty-unused-memory-level",
        "use-cpu-initialization", "no-clone-scatter-output-in-embedding", "train-sync-interval",
        "no-pin-cpu-grads", "no-pin-cpu-params", "high-priority-stream-groups",
        "optimizer-cpu-offload", "optimizer-offload-fraction",
        "use-torch-optimizer-for-cpu-offload", "overlap-cpu-optimizer-d2h-h2d"}},
      {"a communication tuning switch: here gradient buckets always overlap backward and MPI "
       "carries every transfer",
       {"overlap-grad-reduce", "overlap-param-gather", "overlap-param-gather-with-optimizer-step",
        "no-align-grad-reduce", "no-align-param-gather", "ddp-num-buckets", "ddp-bucket-size",
        "ddp-pad-buckets-for-high-nccl-busbw", "ddp-average-in-collective", "use-nccl-ub",
        "disable-symmetric-registration", "use-sharp", "sharp-enabled-group",
        "nccl-communicator-config-path", "no-overlap-p2p-communication",
        "overlap-p2p-communication-warmup-flush", "use-ring-exchange-p2p",
        "no-scatter-gather-tensors-in-pipeline", "distributed-backend", "local-rank",
        "disable-gloo-process-groups", "pipeline-model-parallel-comm-backend",
        "no-async-tensor-model-parallel-allreduce", "tp-comm-overlap", "tp-comm-overlap-cfg",
        "disable-tp-comm-overlap-ag", "disable-tp-comm-overlap-rs", "tp-comm-overlap-rs-dgrad",
        "disable-tp-comm-bulk-dgrad", "disable-tp-comm-bulk-wgrad", "tp-comm-bootstrap-backend",
        "disable-tp-comm-split-ag", "disable-tp-comm-split-rs", "defer-embedding-wgrad-compute",
        "wgrad-deferral-limit"}},
      {"precision of GPU reductions and fp16 loss scaling; CPU training is fp32 throughout",
       {"grad-reduce-in-bf16", "accumulate-allreduce-grads-in-fp32", "attention-softmax-in-fp32",
        "fp32-residual-connection", "loss-scale", "initial-loss-scale", "min-loss-scale",
        "loss-scale-window", "hysteresis"}},
      {"zero-centred norm weights train exactly like plain ones, as norms have no weight decay",
       {"apply-layernorm-1p"}},
      {"a data-loader setting: datasets are memory-mapped and read in the training process",
       {"data-cache-path", "no-mmap-bin-files", "num-workers",
        "no-create-attention-mask-in-dataloader", "num-dataset-builder-threads",
        "mid-level-dataset-surplus"}},
      {"a logging or telemetry switch; the per-iteration metrics line always has loss, "
       "tokens/s, step time and peak memory",
       {"log-params-norm", "log-num-zeros-in-grad", "log-throughput", "log-progress",
        "timing-log-level", "log-energy", "no-barrier-with-level-1-timing", "timing-log-option",
        "tensorboard-log-interval", "tensorboard-queue-size", "log-timers-to-tensorboard",
        "no-log-loss-scale-to-tensorboard", "log-validation-ppl-to-tensorboard",
        "log-memory-to-tensorboard", "log-world-size-to-tensorboard", "wandb-project",
        "wandb-entity", "wandb-exp-name", "wandb-save-dir", "logging-level", "no-one-logger",
        "one-logger-project", "one-logger-run-name", "one-logger-async", "app-tag-run-name",
        "app-tag-run-version", "config-logger-dir", "log-straggler",
        "disable-straggler-on-startup", "straggler-ctrlr-port", "straggler-minmax-count",
        "run-workload-inspector-server", "disable-msc", "onnx-safe"}},
      {"runs are repeatable here: a resumed run is bit-identical to one that never stopped",
       {"deterministic-mode"}},
  };
  return t;
}

const std::vector<FlagGroup>& megatron_refused_flags();

}  // namespace infinipipe::options
