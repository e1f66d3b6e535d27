// Typed configuration of a run. Files and flags are parsed only in src/cli; everything else
// receives these structs already validated. Field names follow Megatron-LM's flags.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace infinipipe {

// The model families a config.json may name (model_type); all are Llama-shaped decoders.
inline constexpr const char* kModelFamilies[] = {"llama", "qwen2", "qwen3", "mistral"};

// The model: a Llama-architecture decoder (Hugging Face LlamaForCausalLM semantics), or one of
// the families that differ from it in the attention block: Qwen2 (q/k/v biases), Qwen3 (q/k
// RMSNorm per head, explicit head_dim), Mistral (sliding window). The C++ engine trains the
// Llama maths only (engine_unsupported); the planner and cost model know every family.
struct ModelConfig {
  int64_t num_layers = 8;
  int64_t hidden_size = 512;
  int64_t num_attention_heads = 8;
  int64_t num_query_groups = 0;         // key/value heads; 0 means = num_attention_heads (no GQA)
  int64_t ffn_hidden_size = 0;          // 0 means Llama's default: 8/3·hidden rounded up to 256
  int64_t vocab_size = 257;             // byte-level tokenizer: 256 bytes + end-of-document
  int64_t seq_length = 4096;            // maximum sequence length; longer documents are truncated
  int64_t max_position_embeddings = 0;  // 0 means = seq_length
  double rotary_base = 10000.0;
  double norm_epsilon = 1e-5;
  bool tie_embeddings = true;  // LM head shares the embedding matrix (Megatron-LM's default)
  // Megatron-LM's --group-query-attention: with num_query_groups = 0 it means one key/value
  // head (Megatron's default of 1 query group); resolved by Config::validate.
  bool group_query_attention = false;
  double init_method_std = 0.02;  // normal init of matrices; residual projections get less
  // llama | qwen2 | qwen3 | mistral: config.json's model_type; from flags, --model-family or
  // derived by resolve_family (qk_layernorm -> qwen3, add_qkv_bias -> qwen2, else llama).
  std::string family = "llama";
  int64_t kv_channels = 0;     // head dimension (Megatron's --kv-channels); 0 = hidden / heads
  bool add_qkv_bias = false;   // Megatron's --add-qkv-bias: q/k/v projections have biases
  bool qk_layernorm = false;   // Megatron's --qk-layernorm: RMSNorm over head_dim of q and k
  int64_t sliding_window = 0;  // attention window in tokens; 0 = none (only seq <= window runs)

  int64_t kv_heads() const { return num_query_groups > 0 ? num_query_groups : num_attention_heads; }
  int64_t head_dim() const {
    return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads;
  }
  int64_t q_size() const { return num_attention_heads * head_dim(); }  // q and o width
  int64_t kv_size() const { return kv_heads() * head_dim(); }          // k and v width
  int64_t ffn_size() const;
  int64_t max_positions() const {
    return max_position_embeddings > 0 ? max_position_embeddings : seq_length;
  }
  // Parameter counts, used by the cost model and by checks of checkpoints.
  int64_t params_per_layer() const;
  int64_t params_embedding() const { return vocab_size * hidden_size; }
  int64_t params_total() const;

  // The family a flag-defined model has when none was named: qwen3 with q/k norm, qwen2 with
  // q/k/v biases (Megatron has no family flag). Config::validate calls it.
  void resolve_family();
  void validate() const;
  // Part of validate() (config_family.cc): the family's features agree, the window holds.
  void validate_family() const;
};

// What of `m` the C++ engine (src/model) cannot compute, e.g. "q/k/v biases (family qwen2)";
// empty when the model is Llama maths (any family without biases, q/k norm or head_dim other
// than hidden/heads). The planner and cost model take every model.
std::string engine_unsupported(const ModelConfig& m);
// The refusal for such a model: names it and the PyTorch trainer that trains it.
std::string engine_unsupported_message(const ModelConfig& m);

// The pipeline schedules; their names, generators, tuners and what each asks of the layout are
// the rows of plan/schedule_table.h, which also checks the virtual stages against the schedule.
enum class Schedule { gpipe, one_f_one_b, interleaved, seq1f1b, epp };

// Megatron-LM's activation recomputation choices, plus infinipipe's per-(stage, chunk) solver.
enum class RecomputeGranularity { none, full, selective, adaptive };
enum class RecomputeMethod { uniform, block };
const char* recompute_granularity_name(RecomputeGranularity g);
const char* recompute_method_name(RecomputeMethod m);

// `train`: whether each rank refits the cost model's time terms from the action times it measures
// and the planner plans the next batches with them (docs/cost-model.md, "Online refit").
enum class CostModelUpdate { online, off };
const char* cost_model_update_name(CostModelUpdate u);
// A document longer than seq-length: its first seq-length tokens are the sample (truncate, the
// paper's protocol), or it becomes consecutive samples of at most seq-length tokens (split).
enum class LongDocuments { truncate, split };
const char* long_documents_name(LongDocuments l);
// train: which ranks form a pipeline (setup/rank_order.h): Megatron's order, the stages of a
// pipeline on adjacent ranks, or auto: the faster of the two on measured links, else the one
// that sends fewer bytes between hosts.
enum class RankPlacement { megatron, pipelines, auto_ };
const char* rank_placement_name(RankPlacement p);
// Which ranks are adjacent: the replicas of a stage (Megatron's order) or the stages of a
// pipeline; what `--rank-placement` resolves to.
enum class RankOrder { megatron, pipelines };
const char* rank_order_name(RankOrder o);
// The world rank of (pipeline rank `stage`, replica) among pp × dp ranks in that order.
inline int64_t rank_in_order(RankOrder o, int64_t pp, int64_t dp, int64_t stage, int64_t replica) {
  return o == RankOrder::megatron ? stage * dp + replica : replica * pp + stage;
}

struct ParallelConfig {
  int64_t pipeline_parallel = 1;         // pp
  int64_t data_parallel = 1;             // dp
  int64_t virtual_stages = 1;            // vpp: model chunks per pipeline rank (interleaved)
  int64_t layers_per_virtual_stage = 0;  // Megatron's alternative to vpp; 0 = unset
  int64_t ulysses_degree = 1;            // sequence-parallel degree inside a stage (planning only)
  Schedule schedule = Schedule::epp;
  RankPlacement rank_placement = RankPlacement::megatron;
  int64_t micro_batch_size = 0;   // sequences per micro-batch for batch-level schedules; 0 = tuned
  int64_t min_tail_slice = 1024;  // shortest tail slice the sequence processor may leave
  int64_t seq1f1b_slices = 0;     // slices per sequence for seq1f1b; 0 = tuned
  RecomputeGranularity recompute_granularity = RecomputeGranularity::adaptive;
  RecomputeMethod recompute_method = RecomputeMethod::uniform;
  int64_t recompute_num_layers = 0;
  // Distributed runs: a point-to-point or collective wait longer than p2p_timeout seconds is an
  // error naming the peer; the watchdog ends the job when a rank stays in one step longer than
  // watchdog_timeout (0 = p2p_timeout + 10). The defaults end a faulty job within 60 s.
  double p2p_timeout = 45.0;
  double watchdog_timeout = 0.0;
  // Megatron's distributed optimizer (ZeRO-1): each data-parallel replica keeps the optimizer
  // state of 1/dp of its stage's parameters, updates that part and all-gathers the weights.
  bool use_distributed_optimizer = false;
  // Model states inside a pipeline stage, DeepSpeed's ZeRO stages (planning and simulation only):
  // 1 shards the optimizer state over the stage's Ulysses group (and over the replicas with
  // use_distributed_optimizer); 3 shards weights, gradients and optimizer state over the
  // ulysses × dp devices that hold the stage, gathering each layer's weights before its forward
  // and its backward and reduce-scattering its gradients (docs/cost-model.md, "ZeRO-3").
  int64_t zero_stage = 1;
  // EPP ablation (the paper's "without balanced chunking"): cut long sequences into slices of
  // equal tokens instead of equal cost.
  bool epp_uniform_slicing = false;
  // Hold back sequences a replica cannot absorb and release them dp at a time
  // (data/outlier_delay.h, docs/data.md "Outlier delay"); off keeps Megatron's data order.
  bool outlier_delay = false;
  // Layers of each (virtual) stage, model order, when the model already lives on its ranks:
  // `train` sets it from the layout it built, so plans keep that layout whatever cost model plans
  // them. Not a flag; empty = the planner splits the layers by cost.
  std::vector<int64_t> stage_layers;
  // EPP with virtual_stages V > 1: false searches every v <= V that splits the layers evenly
  // (what --vpp means to plan and simulate); true plans exactly V (the layout search enumerates
  // each V itself, and train runs the V it ranked). Not a flag.
  bool epp_exact_vpp = false;

  int64_t world_size() const { return pipeline_parallel * data_parallel * ulysses_degree; }
  void validate() const;
};

enum class Optimizer { adamw, sgd };
enum class LrDecayStyle { constant, linear, cosine };
const char* optimizer_name(Optimizer o);
const char* lr_decay_style_name(LrDecayStyle s);

struct TrainingConfig {
  int64_t global_batch_size = 16;  // sequences per iteration, over all data-parallel replicas
  int64_t train_iters = 100;
  // Megatron's --train-samples: samples (documents) to train on instead of --train-iters;
  // Config::validate sets train_iters = train_samples / global_batch_size. 0 = by iterations.
  int64_t train_samples = 0;
  double lr = 3e-4;
  double min_lr = 0.0;
  LrDecayStyle lr_decay_style = LrDecayStyle::linear;
  int64_t lr_warmup_iters = 0;
  int64_t lr_decay_iters = 0;  // 0 means = train_iters
  // The sample-based schedule (with --train-samples): warm-up and decay counted in samples.
  int64_t lr_warmup_samples = 0;
  int64_t lr_decay_samples = 0;  // 0 means = train_samples
  // Warm-up as a fraction of the decay length, in either unit; < 0 = unset (Megatron's None).
  double lr_warmup_fraction = -1;
  double weight_decay = 0.01;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double clip_grad = 1.0;  // 0 disables clipping
  Optimizer optimizer = Optimizer::adamw;
  int64_t seed = 1234;
  std::string save;  // checkpoint directory to write ("" = none)
  std::string load;  // checkpoint directory to resume from ("" = fresh start)
  // Weights only (iteration 0, optimizer fresh), when --load holds no checkpoint (Megatron's).
  std::string pretrained_checkpoint;
  // Start from a Hugging Face folder whose weights hold tensors its config.json does not
  // describe, ignoring them (PyTorch's name for them: unexpected keys); refused otherwise.
  bool ignore_unexpected_keys = false;
  // "" = not given: the tokenizer of the folder the run starts from, else ByteTokenizer
  // (runtime::run_tokenizer resolves it; checkpoints record the resolved one).
  std::string tokenizer_type;
  std::string tensorboard_dir;  // TensorBoard event files (world rank 0); "" = none
  std::string tokenizer_model;  // the SentencePiece .model of tokenizer_type
  int64_t save_interval = 0;    // iterations between checkpoints; 0 = only at the end
  // Megatron's --data-path: one PREFIX (.bin / .idx) or a blend "W1 P1 W2 P2 ..." (data/blend.h),
  // cut into train / validation / test by `split`.
  std::string data_path;
  std::string split = "100,0,0";  // train,validation,test weights over each dataset's documents
  // Megatron's separate blends per split (instead of --data-path and --split).
  std::string train_data_path, valid_data_path, test_data_path;
  LongDocuments long_documents = LongDocuments::truncate;
  int64_t eval_interval = 1000;  // iterations between validation evaluations (Megatron's default)
  int64_t eval_iters = 100;      // global batches per evaluation; 0 = no evaluation
  int64_t memory_budget = 0;     // bytes per rank the plan must fit; 0 = device memory
  bool bf16 = false;  // plan bf16 activations and matmuls (GPU presets); CPU training is fp32
  int64_t log_interval = 1;
  CostModelUpdate cost_model_update = CostModelUpdate::online;
  // Stops that keep the work (docs/reliability.md, "Stopping a run"): every rank finishes the
  // iteration, they agree, save (with --save) and exit 0. Unlike Megatron the signal handler is
  // on by default, so Ctrl-C or a scheduler's SIGTERM never throws the run's work away.
  bool exit_signal_handler = true;   // SIGTERM, SIGINT, SIGUSR1 stop after the iteration
  int64_t exit_interval = 0;         // stop when the iteration is a multiple of it; 0 = never
  double exit_duration_in_mins = 0;  // stop once the run has lasted this long; 0 = never

  int64_t decay_iters() const { return lr_decay_iters > 0 ? lr_decay_iters : train_iters; }
  int64_t decay_samples() const { return lr_decay_samples > 0 ? lr_decay_samples : train_samples; }
  bool sample_based() const { return train_samples > 0; }
  // Any dataset given, by --data-path or the per-split paths.
  bool has_data() const {
    return !data_path.empty() || !train_data_path.empty() || !valid_data_path.empty() ||
           !test_data_path.empty();
  }
  void validate() const;
  // Parts of validate() (config_training.cc): iteration- vs sample-based counts, the data flags.
  void validate_units() const;
  void validate_data() const;
  // --train-samples: train_iters = train_samples / global_batch_size (Megatron's floor).
  void resolve_train_iters();
};

// The cluster being planned for (and, for `train`, the machine it runs on).
struct ClusterConfig {
  std::string device = "cpu";    // preset: cpu, a800-80gb, h100-80gb, h200-141gb
  int64_t num_devices = 0;       // 0 = pp × dp × ulysses (resolved by Config::validate)
  int64_t devices_per_node = 0;  // 0 = all devices in one node
  int64_t device_memory = 0;     // bytes; 0 = the preset's memory
  std::string calibration;       // calibration JSON written by `infinipipe profile` ("" = preset)
  // The links, per device and one direction (effective, as NCCL reaches); 0 = the preset's or
  // the calibration's value. Inter-node bandwidth is one device's share of its node's NICs.
  double intra_node_bandwidth = 0;  // bytes/s
  double inter_node_bandwidth = 0;  // bytes/s
  double intra_node_latency = 0;    // seconds per message
  double inter_node_latency = 0;    // seconds per message
  // train: measure bandwidth and latency between every pair of hosts at start and time the
  // pipeline's transfers by the links they cross (comm/mpi_links.h, cost/pipeline_links.h).
  bool measure_links = false;
  // With measure_links and the online fit: also measure them again every this many iterations
  // (0 = only at start and when the fit notices a slow step; runtime/link_watch.h).
  int64_t measure_links_interval = 100;
  // Device presets the cost model knows (src/cost owns their numbers).
  static constexpr const char* kPresets[] = {"cpu", "a800-80gb", "h100-80gb", "h200-141gb"};

  int64_t num_nodes() const { return (num_devices + devices_per_node - 1) / devices_per_node; }
  void validate() const;
};

// Everything a run needs. validate() runs each struct's check, then the checks across structs
// (layers divisible by stages, devices = pp × dp × ulysses). It also resolves the one derived
// field, layers_per_virtual_stage -> virtual_stages, hence non-const.
struct Config {
  ModelConfig model;
  ParallelConfig parallel;
  TrainingConfig training;
  ClusterConfig cluster;

  void validate();
};

// "2GiB", "512MB", "1.5e9", "80G" -> bytes. Throws ConfigError naming `what` on bad input.
int64_t parse_bytes(const std::string& text, const std::string& what);
std::string format_bytes(int64_t bytes);  // "1.50 GiB"

}  // namespace infinipipe
