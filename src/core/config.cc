#include "core/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/parallel_auto.h"

namespace infinipipe {
namespace {

// Hints search at most this many candidates each way, so no input makes a refusal slow.
constexpr int64_t kHintSteps = 1 << 16;

// Up to three divisors of n nearest `around`, to suggest a fix when n does not divide.
std::string nearby_divisors(int64_t n, int64_t around) {
  around = std::clamp<int64_t>(around, 1, n);
  std::vector<int64_t> ds;
  for (int64_t k = 0; k <= kHintSteps && ds.size() < 3; ++k) {
    for (int64_t d : {around - k, around + k}) {
      if (d >= 1 && d <= n && n % d == 0 && ds.size() < 3 &&
          std::find(ds.begin(), ds.end(), d) == ds.end())
        ds.push_back(d);
    }
  }
  if (ds.empty()) ds.push_back(1);
  std::sort(ds.begin(), ds.end());
  std::string out;
  for (size_t i = 0; i < ds.size(); ++i) out += fmt::format("{}{}", i ? "/" : "", ds[i]);
  return out;
}

// Pipeline degrees that split num_layers evenly into pp x vpp stages (the first few).
std::string fitting_pp(int64_t num_layers, int64_t vpp) {
  std::string out;
  int found = 0;
  for (int64_t pp = 2; pp <= std::min(num_layers / vpp, kHintSteps) && found < 8; ++pp) {
    if (num_layers % (pp * vpp) == 0) {
      out += fmt::format("{}{}", out.empty() ? "" : "/", pp);
      ++found;
    }
  }
  return out.empty() ? "1" : out;
}

// int64 arithmetic that remembers whether any step overflowed.
struct Checked {
  int64_t v = 0;
  bool ok = true;
};
Checked operator*(Checked a, Checked b) {
  Checked r{0, a.ok && b.ok};
  r.ok = r.ok && !__builtin_mul_overflow(a.v, b.v, &r.v);
  return r;
}
Checked operator+(Checked a, Checked b) {
  Checked r{0, a.ok && b.ok};
  r.ok = r.ok && !__builtin_add_overflow(a.v, b.v, &r.v);
  return r;
}

void require_positive(int64_t v, const char* key) {
  if (v <= 0) fail_config("{} must be a positive integer, got {}", key, v);
}

// A parallel degree beyond a million devices is a typo; the bound keeps products in int64.
void require_degree(int64_t v, const char* key) {
  constexpr int64_t kMaxDegree = int64_t{1} << 20;
  require_positive(v, key);
  if (v > kMaxDegree) fail_config("{} {} exceeds {} devices", key, v, kMaxDegree);
}

}  // namespace

int64_t ModelConfig::ffn_size() const {
  if (ffn_hidden_size > 0) return ffn_hidden_size;
  int64_t f = (8 * hidden_size + 2) / 3;  // Llama: 2/3 of 4h, rounded up to a multiple of 256
  return (f + 255) / 256 * 256;
}

// transformers' parameters of one decoder layer (Llama/Qwen2/Qwen3/Mistral modelling code).
int64_t ModelConfig::params_per_layer() const {
  const int64_t h = hidden_size, q = q_size(), kv = kv_size();
  return 2 * h                                     // two RMSNorm weights
         + h * q + 2 * h * kv + q * h              // q, k, v, o
         + (add_qkv_bias ? q + 2 * kv : 0)         // Qwen2's q/k/v biases (o_proj has none)
         + (qk_layernorm ? 2 * head_dim() : 0)     // Qwen3's q_norm and k_norm, [head_dim] each
         + 3 * h * ffn_size();                     // gate, up, down
}

int64_t ModelConfig::params_total() const {
  return num_layers * params_per_layer() + params_embedding() + hidden_size +
         (tie_embeddings ? 0 : params_embedding());
}

// The largest products later code forms must fit int64 with room to spare: the bytes of the
// parameters with their gradients and optimizer state (32 per parameter is more than any
// optimizer keeps) and the activation bytes of one full sequence through every layer.
static void check_model_fits_int64(const ModelConfig& m) {
  if (m.hidden_size > INT64_MAX / 16 || m.ffn_hidden_size > INT64_MAX / 16 ||
      m.kv_channels > INT64_MAX / 16)
    fail_config("hidden-size {}, ffn-hidden-size {} or kv-channels {} is too large to compute with",
                m.hidden_size, m.ffn_hidden_size, m.kv_channels);
  const Checked h{m.hidden_size}, f{m.ffn_size()}, kv{m.kv_heads()}, d{m.head_dim()};
  const Checked heads{m.num_attention_heads};
  const Checked L{m.num_layers}, V{m.vocab_size}, S{m.seq_length}, two{2}, three{3}, four{4};
  const Checked q = heads * d;
  const Checked layer =
      four * h + two * h * q + two * h * kv * d + three * h * f + q + two * kv * d + two * d;
  const Checked params_bytes = (L * layer + two * V * h + h) * Checked{32};
  const Checked activation_bytes = S * (L * (h + q + f) + V) * Checked{64};
  if (!params_bytes.ok || !activation_bytes.ok)
    fail_config(
        "the model is too large to count in 64-bit integers (its parameter or activation bytes "
        "overflow): lower hidden-size, kv-channels, ffn-hidden-size, num-layers, vocab-size or "
        "seq-length");
}

void ModelConfig::validate() const {
  // More layers than any model has; larger counts only make the planner's searches slow.
  constexpr int64_t kMaxLayers = int64_t{1} << 16;
  require_positive(num_layers, "num-layers");
  if (num_layers > kMaxLayers)
    fail_config("num-layers {} exceeds {}: no model has that many layers", num_layers, kMaxLayers);
  require_positive(hidden_size, "hidden-size");
  require_positive(num_attention_heads, "num-attention-heads");
  require_positive(vocab_size, "vocab-size");
  require_positive(seq_length, "seq-length");
  if (kv_channels < 0) fail_config("kv-channels must be >= 0 (0 = hidden-size / heads)");
  if (kv_channels == 0 && hidden_size % num_attention_heads != 0)
    fail_config(
        "hidden-size {} is not divisible by num-attention-heads {}: use num-attention-heads {} "
        "or a hidden-size that is a multiple of {}",
        hidden_size, num_attention_heads, nearby_divisors(hidden_size, num_attention_heads),
        num_attention_heads);
  if (head_dim() % 2 != 0)
    fail_config("head size {} = {} must be even for rotary embeddings",
                kv_channels > 0 ? "kv-channels" : "hidden-size/num-attention-heads", head_dim());
  if (num_query_groups < 0) fail_config("num-query-groups must be >= 0, got {}", num_query_groups);
  if (num_attention_heads % kv_heads() != 0)
    fail_config(
        "num-attention-heads {} is not divisible by num-query-groups {}: use num-query-groups {}",
        num_attention_heads, kv_heads(), nearby_divisors(num_attention_heads, kv_heads()));
  if (ffn_hidden_size < 0) fail_config("ffn-hidden-size must be >= 0 (0 = Llama default)");
  if (!(init_method_std > 0) || init_method_std > 1)
    fail_config("init-method-std must be in (0, 1], got {}; Megatron-LM's default is 0.02",
                init_method_std);
  if (max_position_embeddings < 0) fail_config("max-position-embeddings must be >= 0");
  if (max_positions() < seq_length)
    fail_config(
        "max-position-embeddings {} is smaller than seq-length {}: raise max-position-embeddings "
        "to at least {} or lower seq-length",
        max_positions(), seq_length, seq_length);
  if (!(rotary_base > 1.0)) fail_config("rotary-base must be > 1, got {}", rotary_base);
  if (!(norm_epsilon > 0.0) || norm_epsilon > 1e-1)
    fail_config("norm-epsilon must be in (0, 0.1], got {}", norm_epsilon);
  check_model_fits_int64(*this);
  validate_family();
}

const char* recompute_granularity_name(RecomputeGranularity g) {
  switch (g) {
    case RecomputeGranularity::none:
      return "none";
    case RecomputeGranularity::full:
      return "full";
    case RecomputeGranularity::selective:
      return "selective";
    case RecomputeGranularity::adaptive:
      return "adaptive";
  }
  return "?";
}

const char* cost_model_update_name(CostModelUpdate u) {
  return u == CostModelUpdate::online ? "online" : "off";
}

const char* long_documents_name(LongDocuments l) {
  return l == LongDocuments::split ? "split" : "truncate";
}

const char* rank_placement_name(RankPlacement p) {
  switch (p) {
    case RankPlacement::megatron:
      return "megatron";
    case RankPlacement::pipelines:
      return "pipelines";
    case RankPlacement::auto_:
      break;
  }
  return "auto";
}

const char* rank_order_name(RankOrder o) {
  return o == RankOrder::pipelines ? "pipelines" : "megatron";
}

const char* recompute_method_name(RecomputeMethod m) {
  return m == RecomputeMethod::uniform ? "uniform" : "block";
}

void ParallelConfig::validate() const {
  const std::pair<int64_t, const char*> degrees[] = {
      {pipeline_parallel, "pipeline-model-parallel-size"},
      {data_parallel, "data-parallel-size"},
      {virtual_stages, "virtual-pipeline-model-parallel-size"},
      {ulysses_degree, "ulysses-degree"}};
  for (const auto& [value, key] : degrees)
    if (value == kAutoDegree)
      fail_config(
          "{} auto is chosen by `infinipipe train` (a layout search over its ranks before the "
          "run); plan and simulate rank every layout with --search-layout: give a number here",
          key);
  require_degree(pipeline_parallel, "pipeline-model-parallel-size");
  require_degree(data_parallel, "data-parallel-size");
  require_degree(virtual_stages, "virtual-pipeline-model-parallel-size");
  require_degree(ulysses_degree, "ulysses-degree");
  if (micro_batch_size < 0) fail_config("micro-batch-size must be >= 0 (0 = tuned by the planner)");
  if (min_tail_slice <= 0) fail_config("min-tail-slice must be positive, got {}", min_tail_slice);
  if (seq1f1b_slices < 0) fail_config("seq1f1b-slices must be >= 0 (0 = tuned)");
  if (recompute_num_layers < 0) fail_config("recompute-num-layers must be >= 0");
  if (zero_stage != 1 && zero_stage != 3)
    fail_config(
        "zero-stage must be 1 (optimizer state sharded inside a stage) or 3 (weights, gradients "
        "and optimizer state sharded, layers gathered as they run), got {}",
        zero_stage);
  if (!(p2p_timeout > 0)) {
    fail_config("p2p-timeout must be a positive number of seconds, got {}; the default is 45",
                p2p_timeout);
  }
  if (watchdog_timeout < 0) {
    fail_config(
        "watchdog-timeout must be 0 (= p2p-timeout + 10 s) or a positive number of seconds, got {}",
        watchdog_timeout);
  }
  if (watchdog_timeout > 0 && watchdog_timeout <= p2p_timeout) {
    fail_config(
        "watchdog-timeout ({} s) must exceed p2p-timeout ({} s): the watchdog is the backstop "
        "behind the waits' own deadline; raise --watchdog-timeout or lower --p2p-timeout",
        watchdog_timeout, p2p_timeout);
  }
  if (recompute_granularity == RecomputeGranularity::full && recompute_num_layers == 0)
    fail_config(
        "recompute-granularity full needs --recompute-num-layers N (layers per stage to "
        "recompute, as in Megatron-LM)");
  if (recompute_granularity == RecomputeGranularity::full &&
      recompute_method == RecomputeMethod::uniform && recompute_num_layers > 1)
    fail_config(
        "recompute-method uniform with recompute-num-layers {} recomputes every layer but keeps "
        "one input per {} layers; infinipipe keeps the input of every recomputed layer: use "
        "--recompute-num-layers 1 (every layer recomputed) or --recompute-method block "
        "--recompute-num-layers N (the first N layers of each stage)",
        recompute_num_layers, recompute_num_layers);
}

const char* optimizer_name(Optimizer o) {
  return o == Optimizer::adamw ? "adamw" : "sgd";
}

const char* lr_decay_style_name(LrDecayStyle s) {
  switch (s) {
    case LrDecayStyle::constant:
      return "constant";
    case LrDecayStyle::linear:
      return "linear";
    case LrDecayStyle::cosine:
      return "cosine";
  }
  return "?";
}

void TrainingConfig::validate() const {
  require_positive(global_batch_size, "global-batch-size");
  if (train_iters < 0) fail_config("train-iters must be >= 0, got {}", train_iters);
  if (!(lr >= 0.0)) fail_config("lr must be >= 0, got {}", lr);
  if (!(min_lr >= 0.0) || min_lr > lr)
    fail_config("min-lr {} must be between 0 and lr {}: lower --min-lr", min_lr, lr);
  if (lr_warmup_iters < 0) fail_config("lr-warmup-iters must be >= 0");
  if (lr_decay_iters < 0) fail_config("lr-decay-iters must be >= 0 (0 = train-iters)");
  if (lr_warmup_iters > 0 && train_iters > 0 && lr_warmup_iters > decay_iters())
    fail_config("lr-warmup-iters {} exceeds the decay length {}: lower --lr-warmup-iters",
                lr_warmup_iters, decay_iters());
  if (!(weight_decay >= 0.0)) fail_config("weight-decay must be >= 0, got {}", weight_decay);
  if (!(adam_beta1 >= 0.0 && adam_beta1 < 1.0))
    fail_config("adam-beta1 must be in [0, 1), got {}", adam_beta1);
  if (!(adam_beta2 >= 0.0 && adam_beta2 < 1.0))
    fail_config("adam-beta2 must be in [0, 1), got {}", adam_beta2);
  if (!(adam_eps > 0.0)) fail_config("adam-eps must be > 0, got {}", adam_eps);
  if (!(clip_grad >= 0.0)) fail_config("clip-grad must be >= 0 (0 disables), got {}", clip_grad);
  if (seed < 0) fail_config("seed must be >= 0, got {}", seed);
  if (save_interval < 0) fail_config("save-interval must be >= 0");
  if (memory_budget < 0) fail_config("memory-budget must be >= 0 (0 = device memory)");
  require_positive(log_interval, "log-interval");
  if (exit_interval < 0)
    fail_config("exit-interval must be >= 0 (0 = never), got {}", exit_interval);
  if (!(exit_duration_in_mins >= 0.0))
    fail_config("exit-duration-in-mins must be >= 0 minutes (0 = never), got {}",
                exit_duration_in_mins);
  validate_units();
  validate_data();
}

void ClusterConfig::validate() const {
  bool known = false;
  for (const char* p : kPresets) known = known || device == p;
  if (!known)
    fail_config("unknown device preset '{}': choose one of cpu, a800-80gb, h100-80gb, h200-141gb",
                device);
  if (num_devices < 0) fail_config("num-devices must be >= 0 (0 = pp x dp x ulysses)");
  if (devices_per_node < 0) fail_config("devices-per-node must be >= 0 (0 = one node)");
  struct Link {
    const char* key;
    double value;
    const char* unit;
  };
  const Link links[] = {{"intra-node-bandwidth", intra_node_bandwidth, "bytes/s"},
                        {"inter-node-bandwidth", inter_node_bandwidth, "bytes/s"},
                        {"intra-node-latency", intra_node_latency, "seconds"},
                        {"inter-node-latency", inter_node_latency, "seconds"}};
  for (const Link& l : links)
    if (!(l.value >= 0))
      fail_config("{} must be >= 0 {} (0 = the preset's value), got {}", l.key, l.unit, l.value);
  if (num_devices > (int64_t{1} << 40) || devices_per_node > (int64_t{1} << 40))
    fail_config("num-devices {} or devices-per-node {} exceeds 2^40 devices", num_devices,
                devices_per_node);
  if (num_devices == 0 || devices_per_node == 0) return;  // Config::validate resolves them
  if (devices_per_node > num_devices)
    fail_config("devices-per-node {} exceeds num-devices {}: lower --devices-per-node",
                devices_per_node, num_devices);
  if (num_devices % devices_per_node != 0)
    fail_config("num-devices {} is not a multiple of devices-per-node {}: use num-devices {}",
                num_devices, devices_per_node,
                (num_devices + devices_per_node - 1) / devices_per_node * devices_per_node);
  if (device_memory < 0) fail_config("device-memory must be >= 0 (0 = the preset's memory)");
}

void Config::validate() {
  // Refuses auto before anything uses the degrees.
  if (parallel_has_auto(parallel)) parallel.validate();
  // Megatron asks for virtual stages as layers per virtual stage; resolve it to vpp first.
  if (int64_t per = parallel.layers_per_virtual_stage; per > 0) {
    require_degree(parallel.pipeline_parallel, "pipeline-model-parallel-size");
    require_degree(per, "num-layers-per-virtual-pipeline-stage");
    int64_t stages = parallel.pipeline_parallel * per;
    if (stages <= 0 || model.num_layers % stages != 0)
      fail_config(
          "num-layers {} is not divisible by pipeline-model-parallel-size {} x "
          "num-layers-per-virtual-pipeline-stage {}: use {} layers",
          model.num_layers, parallel.pipeline_parallel, per,
          stages > 0 ? (model.num_layers + stages - 1) / stages * stages : per);
    parallel.virtual_stages = model.num_layers / stages;
    parallel.layers_per_virtual_stage = 0;
  }
  // Megatron-LM's --group-query-attention without --num-query-groups: one query group.
  if (model.group_query_attention && model.num_query_groups == 0) model.num_query_groups = 1;
  model.resolve_family();
  model.validate();
  parallel.validate();
  training.resolve_train_iters();
  training.validate();
  cluster.validate();
  if (cluster.num_devices == 0) cluster.num_devices = parallel.world_size();
  if (cluster.devices_per_node == 0) cluster.devices_per_node = cluster.num_devices;
  cluster.validate();
  const ParallelConfig& p = parallel;
  int64_t stages = p.pipeline_parallel * p.virtual_stages;
  if (model.num_layers < stages)
    fail_config(
        "num-layers {} is fewer than pipeline-model-parallel-size {} x virtual stages {} = {}: "
        "every stage needs a layer; use at least {} layers or fewer stages",
        model.num_layers, p.pipeline_parallel, p.virtual_stages, stages, stages);
  if (p.virtual_stages > 1 && model.num_layers % stages != 0) {
    int64_t up = (model.num_layers + stages - 1) / stages * stages;
    fail_config(
        "num-layers {} is not divisible by pipeline-model-parallel-size {} x virtual stages {}: "
        "use {} layers or pp {}",
        model.num_layers, p.pipeline_parallel, p.virtual_stages, up,
        fitting_pp(model.num_layers, p.virtual_stages));
  }
  if (p.world_size() != cluster.num_devices)
    fail_config(
        "pipeline-model-parallel-size {} x data-parallel-size {} x ulysses-degree {} = {} does "
        "not match num-devices {}: set --num-devices {} or change the degrees",
        p.pipeline_parallel, p.data_parallel, p.ulysses_degree, p.world_size(), cluster.num_devices,
        p.world_size());
  if (p.ulysses_degree > 1 && cluster.devices_per_node % p.ulysses_degree != 0)
    fail_config(
        "ulysses-degree {} does not divide devices-per-node {}: Ulysses all-to-all runs inside "
        "a node; use ulysses-degree {}",
        p.ulysses_degree, cluster.devices_per_node,
        nearby_divisors(cluster.devices_per_node, p.ulysses_degree));
  if (model.num_attention_heads % p.ulysses_degree != 0 || model.kv_heads() % p.ulysses_degree)
    fail_config(
        "ulysses-degree {} must divide num-attention-heads {} and num-query-groups {} (heads are "
        "scattered over the sequence-parallel group): use ulysses-degree {}",
        p.ulysses_degree, model.num_attention_heads, model.kv_heads(),
        nearby_divisors(model.kv_heads(), p.ulysses_degree));
  if (training.global_batch_size < p.data_parallel)
    fail_config(
        "global-batch-size {} is smaller than data-parallel-size {}: every replica needs at least "
        "one sequence; raise --global-batch-size",
        training.global_batch_size, p.data_parallel);
  if (p.outlier_delay && (p.data_parallel < 2 || training.global_batch_size < 2 * p.data_parallel))
    fail_config(
        "outlier-delay releases delayed sequences one per data-parallel replica into a batch that "
        "also fills the others: it needs data-parallel-size >= 2 (got {}) and global-batch-size "
        ">= 2 x data-parallel-size (got {})",
        p.data_parallel, training.global_batch_size);
  if (p.recompute_num_layers > model.num_layers / stages + 1 &&
      p.recompute_granularity == RecomputeGranularity::full)
    fail_config("recompute-num-layers {} exceeds the {} layers of a stage: use at most {}",
                p.recompute_num_layers, model.num_layers / stages, model.num_layers / stages);
}

int64_t parse_bytes(const std::string& text, const std::string& what) {
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) t += c;
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(t, &pos);
  } catch (...) {
    fail_config("{} '{}' is not a size: write bytes or a number with a unit, e.g. 2GiB, 512MB",
                what, text);
  }
  std::string unit = t.substr(pos);
  std::transform(unit.begin(), unit.end(), unit.begin(), ::tolower);
  double mul = 0;
  if (unit.empty() || unit == "b")
    mul = 1;
  else if (unit == "k" || unit == "kib")
    mul = 1024.0;
  else if (unit == "kb")
    mul = 1e3;
  else if (unit == "m" || unit == "mib")
    mul = 1024.0 * 1024;
  else if (unit == "mb")
    mul = 1e6;
  else if (unit == "g" || unit == "gib")
    mul = 1024.0 * 1024 * 1024;
  else if (unit == "gb")
    mul = 1e9;
  else if (unit == "t" || unit == "tib")
    mul = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "tb")
    mul = 1e12;
  else
    fail_config("{} '{}' has an unknown unit '{}': use B, KiB, MiB, GiB, TiB (or KB, MB, GB, TB)",
                what, text, unit);
  if (!(v >= 0) || !std::isfinite(v))
    fail_config("{} '{}' must be a non-negative size", what, text);
  // 1 EiB: far beyond any device, and far from int64's end (1e30GiB used to wrap negative).
  constexpr double kMaxSize = 1152921504606846976.0;  // 2^60
  if (!(v * mul <= kMaxSize))
    fail_config(
        "{} '{}' must be a size in [0, 1 EiB] (at most 1024 PiB); give the size in bytes "
        "or with a unit, e.g. 2GiB",
        what, text);
  return static_cast<int64_t>(std::llround(v * mul));
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 4) v /= 1024.0, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

}  // namespace infinipipe
