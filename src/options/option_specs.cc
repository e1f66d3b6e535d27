#include "options/option_specs.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "core/parallel_auto.h"
#include "plan/schedule_table.h"
#include "tokenize/tokenizer_types.h"

namespace infinipipe::options {
namespace {

// An integer within [lo, hi], the range named in the message, so an extreme value is refused
// here rather than overflowing the arithmetic that uses it (docs/reliability.md, "Flags").
int64_t to_int(const std::string& key, const std::string& v, int64_t lo, int64_t hi) {
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  const bool number = !v.empty() && end == v.data() + v.size();
  if (!number || (ec != std::errc() && ec != std::errc::result_out_of_range))
    fail_config("{} expects an integer in [{}, {}], got '{}'", key, lo, hi, v);
  if (ec == std::errc::result_out_of_range || out < lo || out > hi)
    fail_config("{} must be an integer in [{}, {}], got {}", key, lo, hi, v);
  return out;
}

double to_real(const std::string& key, const std::string& v) {
  size_t pos = 0;
  double out = 0;
  try {
    out = std::stod(v, &pos);
  } catch (...) {
    pos = 0;
  }
  if (pos == 0 || pos != v.size() || !std::isfinite(out))
    fail_config("{} expects a number, got '{}'", key, v);
  return out;
}

}  // namespace

bool to_bool(const std::string& key, const std::string& v) {
  std::string l = v;
  std::transform(l.begin(), l.end(), l.begin(), ::tolower);
  if (l == "true" || l == "1" || l == "yes" || l == "on") return true;
  if (l == "false" || l == "0" || l == "no" || l == "off") return false;
  fail_config("{} expects true or false, got '{}'", key, v);
}

namespace {

std::string real_text(double v) {
  return fmt::format("{}", v);
}

// The ranges: generous for real use, small enough that no product of them overflows int64
// (iterations x batch, layers x hidden x vocab bytes are checked again by Config::validate).
constexpr int64_t kMaxCount = int64_t{1} << 40;    // iterations, intervals, tokens
constexpr int64_t kMaxSamples = int64_t{1} << 50;  // samples: iterations x batch
constexpr int64_t kMaxBatch = int64_t{1} << 20;    // sequences of one global batch
constexpr int64_t kMaxDegree = int64_t{1} << 20;   // parallel degrees, as validate()
constexpr int64_t kMaxLayers = 65536;              // as validate()
constexpr int64_t kMaxWidth = int64_t{1} << 32;    // hidden, ffn, sequence sizes
constexpr int64_t kMaxVocab = int64_t{1} << 31;    // token ids are int32

#define INT_OPT(KEY, ALIASES, HELP, FIELD, LO, HI)                                 \
  OptionSpec {                                                                     \
    KEY, ALIASES, Kind::integer, HELP,                                             \
        [](Config& c, const std::string& v) { c.FIELD = to_int(KEY, v, LO, HI); }, \
        [](const Config& c) { return std::to_string(c.FIELD); }                    \
  }
// A parallel degree: an integer >= 1, or `auto` (kAutoDegree) for `train` to choose by the
// layout search. 0 and negative numbers are refused here, so only the word reaches the sentinel
// and no number means auto (the layout search's own 0 = "searched" stays internal).
int64_t to_degree(const std::string& key, const std::string& v) {
  if (v == "auto") return kAutoDegree;
  const int64_t out = to_int(key, v, INT64_MIN, INT64_MAX);
  if (out >= 1 && out <= kMaxDegree) return out;
  if (out > kMaxDegree) fail_config("{} must be at most {} or auto, got {}", key, kMaxDegree, v);
  // As Megatron-LM's --virtual-pipeline-model-parallel-size: absent means no interleaving.
  if (key == "virtual-pipeline-model-parallel-size")
    fail_config(
        "virtual-pipeline-model-parallel-size counts virtual stages per pipeline rank and must be "
        ">= 1, got {}: give --vpp 1 for no virtual stages or --vpp auto to search (train)",
        v);
  fail_config("{} must be a positive integer or auto (train: chosen by a layout search), got {}",
              key, v);
}

#define DEGREE_OPT(KEY, ALIASES, HELP, FIELD)                                            \
  OptionSpec {                                                                           \
    KEY, ALIASES, Kind::integer, HELP " (train: or auto, chosen by a layout search)",    \
        [](Config& c, const std::string& v) { c.FIELD = to_degree(KEY, v); },            \
        [](const Config& c) {                                                            \
          return c.FIELD == kAutoDegree ? std::string("auto") : std::to_string(c.FIELD); \
        }                                                                                \
  }
#define REAL_OPT(KEY, HELP, FIELD)                                                                 \
  OptionSpec {                                                                                     \
    KEY, {}, Kind::real, HELP, [](Config& c, const std::string& v) { c.FIELD = to_real(KEY, v); }, \
        [](const Config& c) { return real_text(c.FIELD); }                                         \
  }
#define TEXT_OPT(KEY, HELP, FIELD)                                                   \
  OptionSpec {                                                                       \
    KEY, {}, Kind::text, HELP, [](Config& c, const std::string& v) { c.FIELD = v; }, \
        [](const Config& c) { return c.FIELD; }                                      \
  }
#define WORDS_OPT(KEY, HELP, FIELD)                                                   \
  OptionSpec {                                                                        \
    KEY, {}, Kind::words, HELP, [](Config& c, const std::string& v) { c.FIELD = v; }, \
        [](const Config& c) { return c.FIELD; }                                       \
  }
#define FLAG_OPT(KEY, HELP, FIELD)                                                                 \
  OptionSpec {                                                                                     \
    KEY, {}, Kind::flag, HELP, [](Config& c, const std::string& v) { c.FIELD = to_bool(KEY, v); }, \
        [](const Config& c) { return std::string(c.FIELD ? "true" : "false"); }                    \
  }
#define BYTES_OPT(KEY, HELP, FIELD)                                             \
  OptionSpec {                                                                  \
    KEY, {}, Kind::bytes, HELP,                                                 \
        [](Config& c, const std::string& v) { c.FIELD = parse_bytes(v, KEY); }, \
        [](const Config& c) { return std::to_string(c.FIELD); }                 \
  }

template <typename E>
E pick(const std::string& key, const std::string& v,
       std::initializer_list<std::pair<const char*, E>> choices) {
  std::string names;
  for (auto& [name, e] : choices) {
    if (v == name) return e;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  fail_config("{} '{}' is not one of: {}", key, v, names);
}

}  // namespace

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> specs = {
      // model
      INT_OPT("num-layers", {}, "transformer layers", model.num_layers, 1, kMaxLayers),
      INT_OPT("hidden-size", {}, "hidden size", model.hidden_size, 1, kMaxWidth),
      INT_OPT("num-attention-heads", {}, "attention heads", model.num_attention_heads, 1,
              kMaxDegree),
      INT_OPT("num-query-groups", {}, "key/value heads for grouped-query attention (0 = heads)",
              model.num_query_groups, 0, kMaxDegree),
      INT_OPT("ffn-hidden-size", {}, "SwiGLU inner size (0 = Llama's 8/3 hidden)",
              model.ffn_hidden_size, 0, kMaxWidth),
      INT_OPT("vocab-size", {}, "vocabulary size", model.vocab_size, 1, kMaxVocab),
      INT_OPT("seq-length", {}, "maximum sequence length (longer documents: see --long-documents)",
              model.seq_length, 1, kMaxWidth),
      INT_OPT("max-position-embeddings", {}, "largest position (0 = seq-length)",
              model.max_position_embeddings, 0, kMaxWidth),
      REAL_OPT("rotary-base", "RoPE base", model.rotary_base),
      REAL_OPT("norm-epsilon", "RMSNorm epsilon", model.norm_epsilon),
      FLAG_OPT("tie-embeddings", "LM head shares the embedding matrix (Megatron-LM's default)",
               model.tie_embeddings),
      OptionSpec{
          "untie-embeddings-and-output-weights",
          {},
          Kind::flag,
          "Megatron-LM's name for --tie-embeddings=false",
          [](Config& c, const std::string& v) {
            c.model.tie_embeddings = !to_bool("untie-embeddings-and-output-weights", v);
          },
          [](const Config& c) { return std::string(c.model.tie_embeddings ? "false" : "true"); },
          false},
      FLAG_OPT("group-query-attention",
               "grouped-query attention with num-query-groups key/value heads (1 when unset)",
               model.group_query_attention),
      INT_OPT("kv-channels", {},
              "head dimension, Megatron-LM's name (0 = hidden-size / num-attention-heads)",
              model.kv_channels, 0, kMaxWidth),
      FLAG_OPT("add-qkv-bias", "biases on the q/k/v projections (Qwen2; model family qwen2)",
               model.add_qkv_bias),
      FLAG_OPT("qk-layernorm",
               "RMSNorm over head_dim of each query and key head before rotary (Qwen3; model "
               "family qwen3)",
               model.qk_layernorm),
      INT_OPT("sliding-window", {},
              "attention window in tokens (Mistral's sliding_window; 0 = none); only "
              "seq-length <= window, where it masks nothing, is accepted",
              model.sliding_window, 0, kMaxWidth),
      OptionSpec{"model-family",
                 {},
                 Kind::choice,
                 "llama | qwen2 | qwen3 | mistral: the Hugging Face model_type (default: qwen3 "
                 "with --qk-layernorm, qwen2 with --add-qkv-bias, else llama)",
                 [](Config& c, const std::string& v) {
                   c.model.family = pick<std::string>("model-family", v,
                                                      {{"llama", "llama"},
                                                       {"qwen2", "qwen2"},
                                                       {"qwen3", "qwen3"},
                                                       {"mistral", "mistral"}});
                 },
                 [](const Config& c) { return c.model.family; }},
      REAL_OPT("init-method-std",
               "std of the normal init of weight matrices; o_proj and down_proj get "
               "std / sqrt(2 num-layers), as Megatron-LM",
               model.init_method_std),
      // parallelism
      DEGREE_OPT("pipeline-model-parallel-size", {"pp"}, "pipeline stages",
                 parallel.pipeline_parallel),
      DEGREE_OPT("data-parallel-size", {"dp"}, "data-parallel replicas", parallel.data_parallel),
      DEGREE_OPT("virtual-pipeline-model-parallel-size",
                 (std::vector<std::string>{"vpp", "num-virtual-stages-per-pipeline-rank"}),
                 "virtual stages per pipeline rank (interleaved; epp: the most it may use, every "
                 "vpp up to it that splits the layers evenly is searched)",
                 parallel.virtual_stages),
      INT_OPT("num-layers-per-virtual-pipeline-stage", {},
              "Megatron's way to ask for virtual stages: layers in each virtual stage",
              parallel.layers_per_virtual_stage, 0, kMaxLayers),
      DEGREE_OPT("ulysses-degree", {"ds-sequence-parallel-size"},
                 "Ulysses sequence-parallel degree inside a stage (planning)",
                 parallel.ulysses_degree),
      OptionSpec{
          "schedule",
          {},
          Kind::choice,
          plan::schedule_names(" | "),
          [](Config& c, const std::string& v) { c.parallel.schedule = plan::schedule_row(v).id; },
          [](const Config& c) { return std::string(plan::schedule_name(c.parallel.schedule)); }},
      INT_OPT("micro-batch-size", {},
              "sequences per micro-batch, batch-level schedules (0 = tuned)",
              parallel.micro_batch_size, 0, kMaxBatch),
      INT_OPT("min-tail-slice", {}, "shortest tail slice of a sliced sequence, tokens",
              parallel.min_tail_slice, 0, kMaxWidth),
      INT_OPT("seq1f1b-slices", {}, "slices per sequence for seq1f1b (0 = tuned)",
              parallel.seq1f1b_slices, 0, kMaxWidth),
      OptionSpec{"recompute-granularity",
                 {},
                 Kind::choice,
                 "adaptive (per stage and chunk) | full | none",
                 [](Config& c, const std::string& v) {
                   if (v == "selective")
                     fail_config(
                         "recompute-granularity selective is not supported: Megatron's selective "
                         "recompute frees the attention score matrix, which blockwise attention "
                         "never keeps; infinipipe recomputes whole layers: use adaptive (the "
                         "default, per stage and chunk) or full");
                   c.parallel.recompute_granularity =
                       pick<RecomputeGranularity>("recompute-granularity", v,
                                                  {{"none", RecomputeGranularity::none},
                                                   {"full", RecomputeGranularity::full},
                                                   {"adaptive", RecomputeGranularity::adaptive}});
                 },
                 [](const Config& c) {
                   return std::string(recompute_granularity_name(c.parallel.recompute_granularity));
                 }},
      OptionSpec{"recompute-method",
                 {},
                 Kind::choice,
                 "uniform | block",
                 [](Config& c, const std::string& v) {
                   c.parallel.recompute_method = pick<RecomputeMethod>(
                       "recompute-method", v,
                       {{"uniform", RecomputeMethod::uniform}, {"block", RecomputeMethod::block}});
                 },
                 [](const Config& c) {
                   return std::string(recompute_method_name(c.parallel.recompute_method));
                 }},
      INT_OPT("recompute-num-layers", {}, "layers per stage to recompute (full granularity)",
              parallel.recompute_num_layers, 0, kMaxLayers),
      REAL_OPT("p2p-timeout",
               "seconds a distributed rank waits for a peer (send, receive, collective) before "
               "it fails naming the peer",
               parallel.p2p_timeout),
      REAL_OPT("watchdog-timeout",
               "seconds a distributed rank may stay in one step before the job is ended "
               "(0 = p2p-timeout + 10)",
               parallel.watchdog_timeout),
      OptionSpec{"distributed-timeout-minutes",
                 {},
                 Kind::real,
                 "Megatron-LM's name for p2p-timeout, in minutes",
                 [](Config& c, const std::string& v) {
                   c.parallel.p2p_timeout = 60.0 * to_real("distributed-timeout-minutes", v);
                 },
                 [](const Config& c) { return real_text(c.parallel.p2p_timeout / 60.0); },
                 false},
      FLAG_OPT("use-distributed-optimizer",
               "shard the optimizer state over the data-parallel replicas (ZeRO-1, as Megatron's "
               "distributed optimizer)",
               parallel.use_distributed_optimizer),
      INT_OPT("zero-stage", {},
              "model states inside a stage, planning: 1 = optimizer sharded over the Ulysses "
              "group, 3 = weights, gradients and optimizer sharded over ulysses x dp (ZeRO-3)",
              parallel.zero_stage, 0, 3),
      FLAG_OPT("epp-uniform-slicing",
               "ablation: EPP cuts long sequences into slices of equal tokens, not equal cost",
               parallel.epp_uniform_slicing),
      FLAG_OPT("outlier-delay",
               "hold back sequences costlier than their batch's mean replica load and release "
               "them dp at a time, one per replica (WLB-LLM's outlier delay; docs/data.md)",
               parallel.outlier_delay),
      // training
      INT_OPT("global-batch-size", {}, "sequences per iteration over all replicas",
              training.global_batch_size, 1, kMaxBatch),
      INT_OPT("train-iters", {}, "iterations to train", training.train_iters, 0, kMaxCount),
      INT_OPT("train-samples", {},
              "samples (documents) to train on instead of --train-iters: iterations = "
              "train-samples / global-batch-size; the lr schedule then counts samples",
              training.train_samples, 0, kMaxSamples),
      REAL_OPT("lr", "peak learning rate", training.lr),
      REAL_OPT("min-lr", "learning rate at the end of decay", training.min_lr),
      OptionSpec{"lr-decay-style",
                 {},
                 Kind::choice,
                 "constant | linear | cosine",
                 [](Config& c, const std::string& v) {
                   c.training.lr_decay_style =
                       pick<LrDecayStyle>("lr-decay-style", v,
                                          {{"constant", LrDecayStyle::constant},
                                           {"linear", LrDecayStyle::linear},
                                           {"cosine", LrDecayStyle::cosine}});
                 },
                 [](const Config& c) {
                   return std::string(lr_decay_style_name(c.training.lr_decay_style));
                 }},
      INT_OPT("lr-warmup-iters", {}, "linear warm-up iterations", training.lr_warmup_iters, 0,
              kMaxCount),
      INT_OPT("lr-decay-iters", {}, "decay length (0 = train-iters)", training.lr_decay_iters, 0,
              kMaxCount),
      INT_OPT("lr-warmup-samples", {}, "linear warm-up samples (with --train-samples)",
              training.lr_warmup_samples, 0, kMaxSamples),
      INT_OPT("lr-decay-samples", {}, "decay length in samples (0 = train-samples)",
              training.lr_decay_samples, 0, kMaxSamples),
      REAL_OPT("lr-warmup-fraction",
               "warm-up as a fraction of the decay length, instead of --lr-warmup-iters / "
               "--lr-warmup-samples (< 0 = unset)",
               training.lr_warmup_fraction),
      REAL_OPT("weight-decay", "decoupled weight decay (not on norms)", training.weight_decay),
      REAL_OPT("adam-beta1", "AdamW beta1", training.adam_beta1),
      REAL_OPT("adam-beta2", "AdamW beta2", training.adam_beta2),
      REAL_OPT("adam-eps", "AdamW epsilon", training.adam_eps),
      REAL_OPT("clip-grad", "global gradient-norm clip (0 = off)", training.clip_grad),
      OptionSpec{
          "optimizer",
          {},
          Kind::choice,
          "adamw | sgd",
          [](Config& c, const std::string& v) {
            // Megatron calls AdamW "adam"; accept both.
            c.training.optimizer = pick<Optimizer>(
                "optimizer", v,
                {{"adamw", Optimizer::adamw}, {"adam", Optimizer::adamw}, {"sgd", Optimizer::sgd}});
          },
          [](const Config& c) { return std::string(optimizer_name(c.training.optimizer)); }},
      INT_OPT("seed", {}, "random seed (initialisation, data order)", training.seed, 0, INT32_MAX),
      TEXT_OPT("save", "checkpoint directory to write", training.save),
      TEXT_OPT("load",
               "checkpoint directory to resume from, or a Hugging Face Llama folder to start "
               "from (weights only, iteration 0)",
               training.load),
      TEXT_OPT("pretrained-checkpoint",
               "checkpoint or Hugging Face Llama folder whose weights start the run (iteration "
               "0, optimizer fresh) when --load holds no checkpoint",
               training.pretrained_checkpoint),
      FLAG_OPT("ignore-unexpected-keys",
               "start from a Hugging Face folder even though its weights hold tensors its "
               "config.json does not describe (PyTorch's unexpected keys), ignoring them; "
               "without it such a folder is refused, naming them",
               training.ignore_unexpected_keys),
      TEXT_OPT("tokenizer-type",
               fmt::format("tokenizer the data was prepared with, recorded in saved "
                           "checkpoints: {} (not given: the one of the --load / "
                           "--pretrained-checkpoint folder, else {})",
                           tokenize::tokenizer_types_text<tokenize::TokenizerTypesText::names>(),
                           tokenize::kDefaultTokenizerType),
               training.tokenizer_type),
      TEXT_OPT(
          "tokenizer-model",
          fmt::format("the file of --tokenizer-type: {}",
                      tokenize::tokenizer_types_text<tokenize::TokenizerTypesText::model_file>()),
          training.tokenizer_model),
      TEXT_OPT("tensorboard-dir",
               "directory for TensorBoard event files: loss, learning rate, gradient norm, "
               "throughput, iteration time (and validation loss) of every iteration",
               training.tensorboard_dir),
      INT_OPT("save-interval", {},
              "iterations between checkpoints in --save (without --save nothing is saved, as "
              "Megatron-LM)",
              training.save_interval, 0, kMaxCount),
      WORDS_OPT(
          "data-path",
          "Megatron indexed dataset PREFIX (.bin/.idx), or a blend: W1 PREFIX1 W2 PREFIX2 ...",
          training.data_path),
      TEXT_OPT("split",
               "train,validation,test weights over each --data-path dataset's documents, as "
               "Megatron's (e.g. 969,30,1; default 100,0,0: all documents train)",
               training.split),
      WORDS_OPT("train-data-path", "the training blend, instead of --data-path and --split",
                training.train_data_path),
      WORDS_OPT("valid-data-path", "the validation blend, instead of --data-path and --split",
                training.valid_data_path),
      WORDS_OPT("test-data-path", "the test blend, instead of --data-path and --split",
                training.test_data_path),
      INT_OPT("eval-interval", {}, "iterations between validation-loss evaluations",
              training.eval_interval, 0, kMaxCount),
      INT_OPT("eval-iters", {},
              "global batches of the validation split per evaluation (0 = no evaluation)",
              training.eval_iters, 0, kMaxCount),
      FLAG_OPT("exit-signal-handler",
               "on SIGTERM, SIGINT or SIGUSR1 finish the iteration, save (--save) and exit 0; "
               "a second signal stops at once (default true; =false restores the default "
               "actions)",
               training.exit_signal_handler),
      INT_OPT("exit-interval", {},
              "stop with a checkpoint when the iteration is a multiple of this (0 = never)",
              training.exit_interval, 0, kMaxCount),
      REAL_OPT("exit-duration-in-mins",
               "stop with a checkpoint once the run has lasted this many minutes (0 = never)",
               training.exit_duration_in_mins),
      BYTES_OPT("memory-budget",
                "bytes per rank a plan must fit, e.g. 2GiB (0 = the device's usable memory)",
                training.memory_budget),
      FLAG_OPT("bf16", "plan with bf16 activations and matmuls", training.bf16),
      INT_OPT("log-interval", {}, "iterations between log lines", training.log_interval, 0,
              kMaxCount),
      OptionSpec{"long-documents",
                 {},
                 Kind::choice,
                 "a document longer than seq-length: truncate (its first seq-length tokens, the "
                 "paper's protocol) | split (consecutive samples of at most seq-length tokens, "
                 "positions restarting in each)",
                 [](Config& c, const std::string& v) {
                   c.training.long_documents = pick<LongDocuments>(
                       "long-documents", v,
                       {{"truncate", LongDocuments::truncate}, {"split", LongDocuments::split}});
                 },
                 [](const Config& c) {
                   return std::string(long_documents_name(c.training.long_documents));
                 }},
      OptionSpec{"rank-placement",
                 {},
                 Kind::choice,
                 "train: megatron (the replicas of a stage on adjacent ranks) | pipelines (the "
                 "stages of a pipeline on adjacent ranks) | auto (of the two, the faster by "
                 "predicted time with the links --measure-links measured, else the one that "
                 "sends fewer bytes between hosts; printed with its reason)",
                 [](Config& c, const std::string& v) {
                   c.parallel.rank_placement =
                       pick<RankPlacement>("rank-placement", v,
                                           {{"megatron", RankPlacement::megatron},
                                            {"pipelines", RankPlacement::pipelines},
                                            {"auto", RankPlacement::auto_}});
                 },
                 [](const Config& c) {
                   return std::string(rank_placement_name(c.parallel.rank_placement));
                 }},
      OptionSpec{"cost-model-update",
                 {},
                 Kind::choice,
                 "train: online (refit the time terms from measured actions and plan the next "
                 "batches with them) | off",
                 [](Config& c, const std::string& v) {
                   c.training.cost_model_update = pick<CostModelUpdate>(
                       "cost-model-update", v,
                       {{"online", CostModelUpdate::online}, {"off", CostModelUpdate::off}});
                 },
                 [](const Config& c) {
                   return std::string(cost_model_update_name(c.training.cost_model_update));
                 }},
      // cluster
      TEXT_OPT("device", "device preset: cpu, a800-80gb, h100-80gb, h200-141gb", cluster.device),
      INT_OPT("num-devices", {}, "devices in the cluster being planned for", cluster.num_devices, 0,
              kMaxCount),
      INT_OPT("devices-per-node", {}, "devices per node", cluster.devices_per_node, 0, kMaxDegree),
      BYTES_OPT("device-memory", "memory per device (0 = the preset's)", cluster.device_memory),
      TEXT_OPT("calibration", "calibration JSON from `infinipipe profile`", cluster.calibration),
      REAL_OPT("intra-node-bandwidth",
               "bytes/s per device, one direction, inside a node (0 = the preset's)",
               cluster.intra_node_bandwidth),
      REAL_OPT("inter-node-bandwidth",
               "bytes/s per device, one direction, between nodes: its share of the node's NICs "
               "(0 = the preset's)",
               cluster.inter_node_bandwidth),
      REAL_OPT("intra-node-latency", "seconds per message inside a node (0 = the preset's)",
               cluster.intra_node_latency),
      REAL_OPT("inter-node-latency", "seconds per message between nodes (0 = the preset's)",
               cluster.inter_node_latency),
      FLAG_OPT("measure-links",
               "train: measure bandwidth and latency between every pair of hosts at start, "
               "before the rank groups (--rank-placement auto and auto degrees are chosen with "
               "them), and plan the transfers with them instead of the intra/inter-node numbers",
               cluster.measure_links),
      INT_OPT("measure-links-interval", {},
              "train --measure-links with --cost-model-update online: also measure the links "
              "again every this many iterations (0 = only at start and when the online fit "
              "sees a step slower than predicted beyond its noise)",
              cluster.measure_links_interval, 0, kMaxCount),
  };
  return specs;
}

}  // namespace infinipipe::options
