// Time and memory of a chunk on a stage. Formulas: docs/cost-model.md.
#include "cost/cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "cost/calibration.h"

namespace infinipipe::cost {
namespace {

// Forward FLOPs of one layer's matmuls per token (Megatron-LM: 2 FLOPs per multiply-add): q and
// o are hidden x heads·head_dim (hidden² only when head_dim = hidden/heads), k and v
// hidden x kv_heads·head_dim, the MLP 3·hidden·ffn.
double layer_matmul_flops_per_token(const ModelConfig& m) {
  const double h = m.hidden_size, q = m.q_size(), kv = m.kv_size(), f = m.ffn_size();
  return 2.0 * (h * (q + 2 * kv) + q * h + 3 * h * f);
}

// Σ over the slice's tokens of the keys each attends to, doubled: (C+s)² − C² (causal).
double causal_pairs2(const SliceShape& s) {
  double c = static_cast<double>(s.context), l = static_cast<double>(s.len);
  return (c + l) * (c + l) - c * c;
}

int64_t to_bytes(double b) {
  return static_cast<int64_t>(std::ceil(b));
}

void check_chunk(std::span<const SliceShape> chunk) {
  for (const SliceShape& s : chunk)
    if (s.len <= 0 || s.context < 0)
      fail("cost model: bad slice (context {}, len {}): len must be > 0 and context >= 0",
           s.context, s.len);
}

}  // namespace

CollectiveTable device_collectives(const DeviceSpec& d) {
  if (d.collectives.complete()) return d.collectives;
  const double inter_latency = d.inter_node_latency_s > 0 ? d.inter_node_latency_s : d.latency_s;
  return link_table({d.intra_node_bandwidth, d.inter_node_bandwidth, d.latency_s, inter_latency,
                     d.intra_node_bandwidth, d.latency_s},
                    d.link_sources);
}

int64_t chunk_tokens(std::span<const SliceShape> chunk) {
  int64_t t = 0;
  for (const SliceShape& s : chunk) t += s.len;
  return t;
}

Coefficients CostModel::derive_coefficients(const ModelConfig& m, const DeviceSpec& d, int64_t u_,
                                            bool bf16) {
  if (u_ < 1) fail_config("ulysses degree must be >= 1, got {}", u_);
  if (d.peak_flops <= 0 || d.matmul_efficiency <= 0 || d.attention_efficiency <= 0 ||
      d.memory_bandwidth <= 0 || d.intra_node_bandwidth <= 0 || d.inter_node_bandwidth <= 0)
    fail_config("device '{}' needs positive peak FLOP/s, efficiencies and bandwidths", d.name);
  const double u = static_cast<double>(u_);
  const double h = m.hidden_size, q = m.q_size(), kv = m.kv_size(), f = m.ffn_size();
  const double v = m.vocab_size, heads = m.num_attention_heads, kv_heads = m.kv_heads();
  const double b = bf16 ? 2.0 : 4.0;  // bytes of an activation element
  const double mm = d.peak_flops * d.matmul_efficiency;
  Coefficients c;
  // Causal attention: QK^T and AV, 2·heads·head_dim FLOPs per (query, key) pair each, over
  // pairs2/2 pairs.
  c.alpha1 = 2.0 * q / (d.peak_flops * d.attention_efficiency) / u;
  // Elementwise traffic per token per layer, in elements: 2 RMSNorms (read+write h each),
  // rotary on q and k, SwiGLU (read 2f, write f), 2 residual adds (read 2h, write h); Qwen3's
  // q/k RMSNorm reads and writes q and k once more. (Qwen2's biases ride in the GEMM: addmm.)
  const double qk_norm = m.qk_layernorm ? 2 * (q + kv) : 0.0;
  const double elementwise = 4 * h + 2 * (q + kv) + 3 * f + 6 * h + qk_norm;
  c.alpha2 = (layer_matmul_flops_per_token(m) / mm + elementwise * b / d.memory_bandwidth) / u;
  c.beta1 = d.chunk_overhead_s;
  c.embedding_per_token = 2 * h * b / d.memory_bandwidth / u;
  // Final RMSNorm, LM head GEMM, then softmax + loss over fp32 logits (about 3 passes).
  c.lm_head_per_token = (2 * h * v / mm + (4 * h * b + 3 * v * 4.0) / d.memory_bandwidth) / u;
  c.backward_factor = d.backward_factor;
  c.lm_head_backward_factor = d.backward_factor;
  c.recompute_factor = 1.0;
  c.half_efficiency_tokens = d.half_efficiency_tokens;
  c.collectives = device_collectives(d);
  // Saved for backward per layer (elements per token): layer input, norm output, q/k/v,
  // attention output, residual, norm output, gate and up, SwiGLU output; plus fp32 rstd/lse.
  // Qwen3's q/k RMSNorm also keeps its inputs (q and k before the norm) and an fp32 rstd per
  // head; biases keep nothing (their gradient is the output's, summed).
  const double qk_norm_saved = m.qk_layernorm ? (q + kv) * b + (heads + kv_heads) * 4.0 : 0.0;
  c.act_bytes_per_token_layer =
      ((4 * h + 2 * q + 2 * kv + 3 * f) * b + (2 + heads) * 4.0 + qk_norm_saved) / u;
  c.recompute_bytes_per_token_layer = h * b / u;
  c.kv_bytes_per_token_layer = 2 * kv * b / u;
  c.dkv_bytes_per_token_layer = 2 * kv * 4.0 / u;  // accumulated in fp32
  // One layer's activation gradients alive at once: residual in/out, q/k/v, attention output,
  // gate/up/SwiGLU.
  c.grad_bytes_per_token = (2 * h + 2 * q + 2 * kv + 3 * f) * b / u;
  c.fwd_transient_bytes_per_token = 2 * h * b / u;  // the layer's output and a norm output
  c.embedding_bytes_per_token = 8.0 / u;            // token ids
  c.lm_head_bytes_per_token = 2 * h * b / u;
  c.logits_block_tokens = 1024;
  // Adam: fp32 weights 4 + grads 4 + m 4 + v 4; bf16 mixed precision (Megatron): bf16 weights 2
  // + fp32 grads 4 + fp32 master weights 4 + m 4 + v 4 = 18, of which master+m+v shard.
  c.bytes_per_param = bf16 ? 18.0 : 16.0;
  c.optimizer_bytes_per_param = bf16 ? 12.0 : 8.0;
  c.p2p_bytes_per_token = h * b / u;
  return c;
}

CostModel::CostModel(const ModelConfig& model, const DeviceSpec& device, int64_t ulysses_degree,
                     bool bf16)
    : CostModel(model, device, derive_coefficients(model, device, ulysses_degree, bf16),
                ulysses_degree, bf16) {}

CostModel::CostModel(const ModelConfig& model, const DeviceSpec& device, const Coefficients& coeffs,
                     int64_t ulysses_degree, bool bf16)
    : model_(model),
      device_(device),
      coeffs_(coeffs),
      ulysses_degree_(ulysses_degree),
      bf16_(bf16) {
  if (ulysses_degree < 1) fail_config("ulysses degree must be >= 1, got {}", ulysses_degree);
  // The formulas divide by these; a zero would turn every prediction into infinity.
  for (const bool across : {false, true})
    for (int k = 0; k < kCollectives; ++k) {
      const auto op = static_cast<Collective>(k);
      const double bw = coeffs.collectives.row(op, across).bus_bandwidth;
      if (!(bw > 0))
        fail_config("cost model for '{}': the {} {} bus bandwidth must be > 0, got {}", device.name,
                    across ? "inter-node" : "intra-node", collective_name(op), bw);
    }
  if (coeffs.alpha1 < 0 || coeffs.alpha2 < 0 || coeffs.beta1 < 0 ||
      coeffs.half_efficiency_tokens < 0)
    fail_config("cost model for '{}': time coefficients must be >= 0", device.name);
}

CostModel CostModel::with_ulysses_degree(int64_t degree, int64_t devices_per_node) const {
  if (degree < 1) fail_config("ulysses degree must be >= 1, got {}", degree);
  const double k = static_cast<double>(ulysses_degree_) / static_cast<double>(degree);
  Coefficients c = coeffs_;
  for (double* v :
       {&c.alpha1, &c.alpha2, &c.embedding_per_token, &c.lm_head_per_token,
        &c.index_bytes_per_token, &c.attn_workspace_bytes_per_longest_token,
        &c.lm_head_grad_reuse_bytes_per_token, &c.act_bytes_per_token_layer,
        &c.recompute_bytes_per_token_layer, &c.kv_bytes_per_token_layer,
        &c.dkv_bytes_per_token_layer, &c.grad_bytes_per_token, &c.fwd_transient_bytes_per_token,
        &c.embedding_bytes_per_token, &c.lm_head_bytes_per_token, &c.p2p_bytes_per_token})
    *v *= k;
  CostModel out(model_, device_, c, degree, bf16_);
  out.ulysses_per_node_ = devices_per_node > 0 && devices_per_node < degree ? devices_per_node : 0;
  out.host_links_ = host_links_;  // the cluster's hosts do not depend on the degree
  return out;
}

namespace {

// The cluster's link values, where given, replace the device's (and a calibration's fitted ones).
void apply_cluster_links(const ClusterConfig& cl, DeviceSpec& d, Coefficients* c = nullptr) {
  const std::string given = "; set by the configuration:";
  std::string note;
  if (cl.intra_node_bandwidth > 0) {
    d.intra_node_bandwidth = cl.intra_node_bandwidth;
    note += " intra-node bandwidth";
  }
  if (cl.inter_node_bandwidth > 0) {
    d.inter_node_bandwidth = cl.inter_node_bandwidth;
    note += " inter-node bandwidth";
  }
  if (cl.intra_node_latency > 0) {
    d.latency_s = cl.intra_node_latency;
    note += " intra-node latency";
  }
  if (cl.inter_node_latency > 0) {
    d.inter_node_latency_s = cl.inter_node_latency;
    note += " inter-node latency";
  }
  // A link given for a span replaces it in every collective of that span (the table's rows; a
  // device without rows of its own takes them from its links, set above).
  for (CollectiveTable* t :
       {d.collectives.complete() ? &d.collectives : nullptr, c ? &c->collectives : nullptr}) {
    if (!t) continue;
    override_span(*t, false, cl.intra_node_bandwidth, cl.intra_node_latency);
    override_span(*t, true, cl.inter_node_bandwidth, cl.inter_node_latency);
  }
  if (!note.empty()) d.link_sources += given + note;
}

}  // namespace

CostModel CostModel::from_config(const Config& cfg) {
  const int64_t u = cfg.parallel.ulysses_degree;
  const bool bf16 = cfg.training.bf16;
  if (cfg.cluster.calibration.empty()) {
    DeviceSpec d = device_preset(cfg.cluster.device, bf16);
    if (cfg.cluster.device_memory > 0) d.memory_bytes = cfg.cluster.device_memory;
    apply_cluster_links(cfg.cluster, d);
    return CostModel(cfg.model, d, u, bf16);
  }
  Calibration cal = load_calibration(cfg.cluster.calibration);
  const ModelConfig &a = cal.model, &m = cfg.model;
  if (a.hidden_size != m.hidden_size || a.ffn_size() != m.ffn_size() ||
      a.num_attention_heads != m.num_attention_heads || a.kv_heads() != m.kv_heads() ||
      a.vocab_size != m.vocab_size || a.head_dim() != m.head_dim() ||
      a.add_qkv_bias != m.add_qkv_bias || a.qk_layernorm != m.qk_layernorm)
    fail_config(
        "calibration '{}' was fitted for hidden {} / ffn {} / heads {} / kv heads {} / vocab {} / "
        "head_dim {} / qkv bias {} / qk norm {}, but the model has {} / {} / {} / {} / {} / {} / "
        "{} / {}: profile this model again or drop --calibration",
        cfg.cluster.calibration, a.hidden_size, a.ffn_size(), a.num_attention_heads, a.kv_heads(),
        a.vocab_size, a.head_dim(), a.add_qkv_bias, a.qk_layernorm, m.hidden_size, m.ffn_size(),
        m.num_attention_heads, m.kv_heads(), m.vocab_size, m.head_dim(), m.add_qkv_bias,
        m.qk_layernorm);
  if (cal.ulysses_degree != u || cal.bf16 != bf16)
    fail_config(
        "calibration '{}' was fitted for ulysses degree {} and {}, but the run uses {} and {}: "
        "profile again with these settings",
        cfg.cluster.calibration, cal.ulysses_degree, cal.bf16 ? "bf16" : "fp32", u,
        bf16 ? "bf16" : "fp32");
  if (cfg.cluster.device_memory > 0) cal.device.memory_bytes = cfg.cluster.device_memory;
  apply_cluster_links(cfg.cluster, cal.device, &cal.coeffs);
  const CostModel out(cfg.model, cal.device, cal.coeffs, u, bf16);
  return cal.host_links.empty() ? out : out.with_host_links(std::move(cal.host_links));
}

// One layer's compute, forward, seconds (all-to-alls excluded): linear work pays the efficiency
// curve eff(t) = t/(t + t_half) on the chunk's tokens per device t = T/u, i.e.
// α2·T·(t + t_half)/t; attention pays α1 per causal pair. Coefficients are per token of the whole
// chunk, already divided by the Ulysses degree.
double CostModel::layer_seconds(std::span<const SliceShape> chunk, const Coefficients& c) const {
  check_chunk(chunk);
  if (chunk.empty()) return 0.0;
  double pairs2 = 0;
  for (const SliceShape& s : chunk) pairs2 += causal_pairs2(s);
  const double t = static_cast<double>(chunk_tokens(chunk));
  return c.alpha1 * pairs2 + c.alpha2 * t / efficiency(chunk, c);
}

double CostModel::attention_seconds(std::span<const SliceShape> chunk) const {
  check_chunk(chunk);
  double pairs2 = 0;
  for (const SliceShape& s : chunk) pairs2 += causal_pairs2(s);
  return coeffs_.alpha1 * pairs2;
}

double CostModel::efficiency(std::span<const SliceShape> chunk, const Coefficients& c) const {
  const double t = static_cast<double>(chunk_tokens(chunk)) / ulysses_degree_;
  return t / (t + c.half_efficiency_tokens);
}

// Compute of the stage's layers plus embedding, forward, without β1 and all-to-alls.
double CostModel::stage_compute_seconds(std::span<const SliceShape> chunk, const StageShape& stage,
                                        const Coefficients& c) const {
  const double t = static_cast<double>(chunk_tokens(chunk));
  double s = stage.num_layers * layer_seconds(chunk, c);
  if (stage.has_embedding) s += c.embedding_per_token * t;
  return s;
}

double CostModel::lm_head_seconds(std::span<const SliceShape> chunk, const StageShape& stage,
                                  const Coefficients& c) const {
  if (!stage.has_lm_head) return 0.0;
  return c.lm_head_per_token * static_cast<double>(chunk_tokens(chunk)) / efficiency(chunk, c);
}

double CostModel::forward_time(std::span<const SliceShape> chunk, const StageShape& stage) const {
  if (chunk.empty()) return 0.0;
  const Coefficients& c = time_coefficients(stage.rank);
  return c.beta1 + stage_compute_seconds(chunk, stage, c) + lm_head_seconds(chunk, stage, c) +
         stage.num_layers * ulysses_alltoall_time(chunk_tokens(chunk));
}

// The all-to-alls of the backward move as many bytes as the forward's (4 per layer).
double CostModel::backward_time(std::span<const SliceShape> chunk, const StageShape& stage) const {
  if (chunk.empty()) return 0.0;
  const Coefficients& c = time_coefficients(stage.rank);
  return c.beta1 + c.backward_factor * stage_compute_seconds(chunk, stage, c) +
         c.lm_head_backward_factor * lm_head_seconds(chunk, stage, c) +
         stage.num_layers * ulysses_alltoall_time(chunk_tokens(chunk));
}

double CostModel::recompute_time(std::span<const SliceShape> chunk, int64_t recompute_layers,
                                 int32_t rank) const {
  if (recompute_layers < 0)
    fail("cost model: recompute_layers must be >= 0, got {}", recompute_layers);
  if (chunk.empty() || recompute_layers == 0) return 0.0;
  const Coefficients& c = time_coefficients(rank);
  return recompute_layers * (c.recompute_factor * layer_seconds(chunk, c) +
                             ulysses_alltoall_time(chunk_tokens(chunk)));
}

CostModel CostModel::with_rank_coefficients(std::vector<Coefficients> rank_coeffs) const {
  CostModel out = *this;
  out.rank_coeffs_ = std::move(rank_coeffs);
  return out;
}

CostModel CostModel::with_rank_hosts(std::vector<RankHost> hosts) const {
  CostModel out = *this;
  out.rank_hosts_ = std::move(hosts);
  return out;
}

CostModel CostModel::with_pipeline_links(PipelineLinks links) const {
  links.validate();
  CostModel out = *this;
  out.links_ = std::move(links);
  return out;
}

CostModel CostModel::with_host_links(HostLinkTable table) const {
  table.validate();
  CostModel out = *this;
  out.host_links_ = std::move(table);
  return out;
}

CostModel CostModel::with_coefficients(const Coefficients& coeffs) const {
  CostModel out(model_, device_, coeffs, ulysses_degree_, bf16_);
  out.ulysses_per_node_ = ulysses_per_node_;
  out.links_ = links_;
  out.host_links_ = host_links_;
  return out;
}

CostModel CostModel::with_replica_links(const RankGrid& grid, int64_t replica) const {
  if (host_links_.empty()) return *this;
  return with_pipeline_links(host_pipeline_links(host_links_, coeffs_, grid, replica));
}

double CostModel::p2p_time_between(int64_t bytes, int32_t from, int32_t to, bool inter_node) const {
  if (links_.empty() || from < 0 || to < 0 || from >= links_.pp || to >= links_.pp)
    return p2p_time(bytes, inter_node);
  return link_time(links_.at(from, to), bytes);
}

const Coefficients& CostModel::time_coefficients(int32_t rank) const {
  if (rank >= 0 && static_cast<size_t>(rank) < rank_coeffs_.size())
    return rank_coeffs_[static_cast<size_t>(rank)];
  return coeffs_;
}

int64_t CostModel::p2p_bytes(std::span<const SliceShape> chunk) const {
  return to_bytes(coeffs_.p2p_bytes_per_token * chunk_tokens(chunk));
}

double CostModel::collective_time(Collective op, const DeviceGroup& g, double bytes) const {
  return coeffs_.collectives.time(op, g, bytes);
}

double CostModel::p2p_time(int64_t bytes, bool inter_node) const {
  const DeviceGroup pair{0, 2, inter_node ? 1 : 2};
  return collective_time(Collective::send_recv, pair, static_cast<double>(bytes));
}

// Eq. 3: four all-to-alls per layer (Q, K, V in; attention output back), each of one device's
// t/u tokens; priced as four calls of their mean size.
double CostModel::ulysses_alltoall_time(int64_t tokens) const {
  if (ulysses_degree_ <= 1 || tokens <= 0) return 0.0;
  const double u = static_cast<double>(ulysses_degree_);
  const double q = model_.q_size(), kv = model_.kv_size();
  const double b = bf16_ ? 2.0 : 4.0;
  const double bytes = static_cast<double>(tokens) / u * (2 * q + 2 * kv) * b;
  const DeviceGroup group{0, ulysses_degree_,
                          ulysses_per_node_ > 0 ? ulysses_per_node_ : ulysses_degree_};
  return 4 * collective_time(Collective::all_to_all, group, bytes / 4);
}

int64_t CostModel::static_bytes(const StageShape& stage, int64_t dp, bool zero_shard) const {
  if (dp < 1) fail_config("data-parallel degree must be >= 1, got {}", dp);
  double params = static_cast<double>(stage.num_layers) * model_.params_per_layer();
  const double table = static_cast<double>(model_.params_embedding());
  if (stage.has_embedding) params += table;
  if (stage.has_lm_head) {
    params += model_.hidden_size;  // final norm
    // A tied head shares the table only when the embedding lives on the same stage.
    if (!(model_.tie_embeddings && stage.has_embedding)) params += table;
  }
  double shard = zero_shard ? static_cast<double>(dp * ulysses_degree_) : 1.0;
  return to_bytes(params * (coeffs_.bytes_per_param - coeffs_.optimizer_bytes_per_param) +
                  params * coeffs_.optimizer_bytes_per_param / shard);
}

// Tokens of non-final slices: their K/V stay until their backward. (The CPU engine keeps the
// K/V of its whole chunk then, which is the same: only split chunks hold a non-final slice.)
static double kv_keep_tokens(std::span<const SliceShape> chunk) {
  double t = 0;
  for (const SliceShape& s : chunk)
    if (!s.final_slice) t += s.len;
  return t;
}

int64_t CostModel::activation_bytes(std::span<const SliceShape> chunk, const StageShape& stage,
                                    int64_t recompute_layers) const {
  check_chunk(chunk);
  if (recompute_layers < 0 || recompute_layers > stage.num_layers)
    fail("cost model: recompute_layers {} must be within 0..{} (the stage's layers)",
         recompute_layers, stage.num_layers);
  const double t = static_cast<double>(chunk_tokens(chunk)), t_keep = kv_keep_tokens(chunk);
  const int64_t full = stage.num_layers - recompute_layers;
  double bytes = t * (full * coeffs_.act_bytes_per_token_layer +
                      recompute_layers * coeffs_.recompute_bytes_per_token_layer);
  bytes -= t_keep * full * coeffs_.kv_bytes_per_token_layer;  // counted in kv_keep_bytes
  bytes += t * coeffs_.index_bytes_per_token;
  if (stage.has_embedding) bytes += t * coeffs_.embedding_bytes_per_token;
  if (stage.has_lm_head) bytes += t * coeffs_.lm_head_bytes_per_token;
  return to_bytes(bytes);
}

int64_t CostModel::kv_keep_bytes(std::span<const SliceShape> chunk, const StageShape& stage) const {
  return to_bytes(kv_keep_tokens(chunk) * stage.num_layers * coeffs_.kv_bytes_per_token_layer);
}

int64_t CostModel::dkv_buffer_bytes(std::span<const SliceShape> chunk,
                                    const StageShape& stage) const {
  double t = 0;
  for (const SliceShape& s : chunk) t += s.context;
  return to_bytes(t * stage.num_layers * coeffs_.dkv_bytes_per_token_layer);
}

int64_t CostModel::forward_transient_bytes(std::span<const SliceShape> chunk,
                                           const StageShape& stage) const {
  check_chunk(chunk);
  const double t = static_cast<double>(chunk_tokens(chunk));
  if (t == 0) return 0;
  double bytes = t * coeffs_.fwd_transient_bytes_per_token;
  if (stage.has_lm_head) {
    // The fused head computes logits and loss one block at a time, fp32.
    const double block =
        std::min<double>(static_cast<double>(coeffs_.logits_block_tokens), t / ulysses_degree_);
    bytes += block * model_.vocab_size * 4.0;
  }
  return to_bytes(bytes);
}

int64_t CostModel::backward_transient_bytes(std::span<const SliceShape> chunk,
                                            const StageShape& stage,
                                            int64_t recompute_layers) const {
  check_chunk(chunk);
  const double t = static_cast<double>(chunk_tokens(chunk));
  if (t == 0) return 0;
  int64_t longest = 0;
  for (const SliceShape& s : chunk) longest = std::max(longest, s.len);
  double bytes = t * coeffs_.grad_bytes_per_token + coeffs_.attn_workspace_bytes +
                 static_cast<double>(longest) * coeffs_.attn_workspace_bytes_per_longest_token;
  // The backward runs from the top layer down and frees each layer's stash after it. When the
  // top layer is not recomputed, its freed stash is larger than any later recompute, so only a
  // stage recomputing every layer holds one recomputed layer on top of everything it saved
  // (minus the input, which is kept, and K/V, which a non-final slice keeps).
  if (recompute_layers > 0 && recompute_layers >= stage.num_layers)
    bytes += t * (coeffs_.act_bytes_per_token_layer - coeffs_.recompute_bytes_per_token_layer) -
             kv_keep_tokens(chunk) * coeffs_.kv_bytes_per_token_layer;
  if (stage.has_lm_head) {
    // Logits and their gradient for one block of tokens, fp32, per device.
    const double block =
        std::min<double>(static_cast<double>(coeffs_.logits_block_tokens), t / ulysses_degree_);
    bytes += coeffs_.backward_logits_blocks * block * model_.vocab_size * 4.0;
    bytes -= t * coeffs_.lm_head_grad_reuse_bytes_per_token;
  }
  return to_bytes(std::max(0.0, bytes));
}

double CostModel::flops(std::span<const SliceShape> chunk, int64_t num_layers, bool lm_head) const {
  check_chunk(chunk);
  double pairs2 = 0;
  for (const SliceShape& s : chunk) pairs2 += causal_pairs2(s);
  const double t = static_cast<double>(chunk_tokens(chunk));
  double f = num_layers * (layer_matmul_flops_per_token(model_) * t +
                           2.0 * static_cast<double>(model_.q_size()) * pairs2);
  if (lm_head) f += 2.0 * model_.hidden_size * model_.vocab_size * t;
  return f;
}

}  // namespace infinipipe::cost
