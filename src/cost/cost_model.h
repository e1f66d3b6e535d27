// The cost model: time and memory of a chunk on a pipeline stage (InfiniPipe, arXiv 2509.21275,
// §III-A). Every number comes from a Coefficients value, derived from a device preset or loaded
// from a calibration JSON file; docs/cost-model.md explains each term and its source.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/collective_table.h"
#include "cost/core_sharing.h"
#include "cost/host_link_table.h"
#include "cost/pipeline_links.h"

namespace infinipipe::cost {

// `len` tokens attending to `context` earlier tokens of the same sequence.
struct SliceShape {
  int64_t context = 0;
  int64_t len = 0;
  // false for a NON-final slice of a split sequence: later slices attend to its K/V, so they are
  // kept until its backward (see kv_keep_bytes). Whole sequences and tail slices are final.
  bool final_slice = true;
};

// The layers one pipeline stage owns (one virtual stage when vpp > 1).
struct StageShape {
  int64_t num_layers = 0;
  bool has_embedding = false;
  bool has_lm_head = false;  // final norm + LM head + cross-entropy loss
  // Pipeline rank that runs the stage: its own time coefficients when the model has some
  // (CostModel::with_rank_coefficients); -1 (or a rank without its own) uses the shared ones.
  int32_t rank = -1;
};

// A device and its links. Efficiencies are fractions of peak the time model assumes.
struct DeviceSpec {
  std::string name;
  double peak_flops = 0;     // dense matmul FLOP/s (bf16 or fp32, as planned)
  int64_t memory_bytes = 0;  // device memory
  // What a training process cannot fill with tensors: the CUDA context, NCCL's buffers and the
  // caching allocator's headroom. The same for every system planned or compared
  // (docs/cost-model.md, "Usable memory"); 0 on the cpu preset.
  int64_t reserved_memory_bytes = 0;
  double memory_bandwidth = 0;        // bytes/s, for memory-bound elementwise work
  double intra_node_bandwidth = 0;    // bytes/s per device, one direction (NVLink, shared memory)
  double inter_node_bandwidth = 0;    // bytes/s per device, one direction (IB share)
  double latency_s = 0;               // per message inside a node
  double inter_node_latency_s = 0;    // per message between nodes (0 = latency_s)
  CollectiveTable collectives;        // what each collective costs (device_collectives)
  double matmul_efficiency = 0;       // reached by large GEMMs (MFU-like)
  double attention_efficiency = 0;    // reached by (flash) attention
  double half_efficiency_tokens = 0;  // eff(t) = t / (t + this): small chunks under-use the device
  double chunk_overhead_s = 0;        // β1: per chunk and stage (launches, syncs, scheduling)
  double backward_factor = 2.0;       // backward time / forward time
  double sgemm_flops = 0;             // fp32 sgemm FLOP/s measured by `infinipipe profile`; 0 = not
  std::string sources;                // where the numbers come from
  std::string link_sources;           // where the link numbers come from, what they assume
};

// The table a device's collectives are priced from: its own rows when complete, else those its
// links imply (link_table, the all-to-all at the intra-node link and latency).
CollectiveTable device_collectives(const DeviceSpec& device);

// The default memory budget of one device (when --memory-budget is not given): its memory less
// what is reserved.
int64_t usable_memory_bytes(const DeviceSpec& device);

// Names of the presets device_preset() knows.
std::span<const char* const> device_preset_names();
// Throws ConfigError for unknown names, listing the known ones.
DeviceSpec device_preset(const std::string& name, bool bf16);
// The preset of a GPU by the name its driver reports ("NVIDIA H100 80GB HBM3" -> h100-80gb), or
// "" for a GPU without one (`--device cuda` then needs a --calibration file).
std::string gpu_preset(const std::string& reported_name);

// Everything the time and memory formulas use. Per-token coefficients are per token of the whole
// chunk and give one device's seconds or bytes, so they are already divided by the Ulysses degree.
// A calibration file stores exactly these; presets derive them from a DeviceSpec.
struct Coefficients {
  // time, seconds (forward, one layer unless noted), before the efficiency curve
  double alpha1 = 0;               // per token² of causal attention: α1·((C+s)² − C²)
  double alpha2 = 0;               // per token: projections, MLP, norms, elementwise
  double beta1 = 0;                // per chunk and stage
  double embedding_per_token = 0;  // whole embedding lookup (not per layer)
  double lm_head_per_token = 0;    // final norm + LM head + loss, forward
  double backward_factor = 2.0;    // backward / forward (excludes recompute)
  // The LM head's backward / its forward: backward_factor where backward computes the head's
  // gradient (Megatron), about 0 where the loss computes it in forward (the CPU engine).
  double lm_head_backward_factor = 2.0;
  double recompute_factor = 1.0;      // recompute / forward of the same layers
  double half_efficiency_tokens = 0;  // eff(t) = t / (t + this), t = tokens of the chunk per device
  // A training rank's per-step costs outside its actions, measured while training (0 in presets
  // and calibrations, which time kernels alone): the executor's bookkeeping before each action,
  // and the tail after the last one (exposed data-parallel all-reduce, clip, optimizer step).
  // docs/cost-model.md, "Per-rank costs".
  double action_gap_s = 0;
  double step_tail_s = 0;
  // communication: every collective and send/recv, inside a node and across nodes
  CollectiveTable collectives;
  // memory, bytes per token (per device) per layer unless noted
  double act_bytes_per_token_layer = 0;  // saved activations of a non-recomputed layer, incl. K/V
  double recompute_bytes_per_token_layer = 0;  // a recomputed layer keeps only its input
  double kv_bytes_per_token_layer = 0;         // K and V (part of act_bytes_per_token_layer)
  double dkv_bytes_per_token_layer = 0;  // dK/dV accumulation buffer of a sliced sequence prefix
  double grad_bytes_per_token = 0;       // activation-gradient buffers live during a backward
  double fwd_transient_bytes_per_token = 0;  // buffers a forward allocates and frees (not saved)
  double embedding_bytes_per_token = 0;      // saved by the embedding stage
  double lm_head_bytes_per_token = 0;        // saved by the last stage (final norm input/output)
  int64_t logits_block_tokens = 1024;        // fused LM head works on blocks of this many tokens
  double bytes_per_param = 16;               // weights + grads + optimizer, unsharded
  double optimizer_bytes_per_param = 8;      // the part a ZeRO/distributed optimizer shards
  double p2p_bytes_per_token = 0;            // hidden state sent between stages
  // Engine-specific terms a calibration sets (0 for presets; optional in calibration files).
  double index_bytes_per_token = 0;  // positions / token ids every stage keeps for a chunk
  double attn_workspace_bytes = 0;   // attention tiles of a backward (per thread, all threads)
  double attn_workspace_bytes_per_longest_token = 0;  // × tokens of the chunk's longest slice
  double backward_logits_blocks = 2;  // logits blocks live in a last-stage backward (fused: 0)
  // Last stage: a backward reuses the saved loss gradient (lm_head_bytes_per_token) as its own
  // gradient buffer, so it needs this many bytes per token less; >= 0.
  double lm_head_grad_reuse_bytes_per_token = 0;
};

class CostModel {
 public:
  CostModel(const ModelConfig& model, const DeviceSpec& device, int64_t ulysses_degree, bool bf16);
  CostModel(const ModelConfig& model, const DeviceSpec& device, const Coefficients& coeffs,
            int64_t ulysses_degree, bool bf16);
  // Preset of cfg.cluster.device (memory overridden by cfg.cluster.device_memory), or the
  // coefficients of cfg.cluster.calibration when set.
  static CostModel from_config(const Config& cfg);
  // Coefficients a preset implies for this model (what the first constructor uses).
  static Coefficients derive_coefficients(const ModelConfig& model, const DeviceSpec& device,
                                          int64_t ulysses_degree, bool bf16);
  // The same device and coefficients for another Ulysses degree (per-token terms rescaled).
  // devices_per_node: how many of the group's devices share a node (the group is aligned to
  // nodes); 0, or at least the degree, keeps the group inside one node. A group across nodes
  // sends part of each all-to-all over the inter-node link (docs/cost-model.md, "Collective
  // costs").
  // Per-rank coefficients, hosts and pipeline links are not kept (they were measured at this
  // degree); the host links are.
  CostModel with_ulysses_degree(int64_t degree, int64_t devices_per_node) const;

  const DeviceSpec& device() const { return device_; }
  const Coefficients& coefficients() const { return coeffs_; }
  const ModelConfig& model() const { return model_; }
  int64_t ulysses_degree() const { return ulysses_degree_; }
  bool bf16() const { return bf16_; }

  // Seconds on ONE stage (its layers, plus embedding / LM head + loss when the stage has them),
  // including β1 and the stage's Ulysses all-to-alls (4 per layer each way).
  double forward_time(std::span<const SliceShape> chunk, const StageShape& stage) const;
  // Excludes recompute: backward_factor × forward compute + β1 + all-to-alls.
  double backward_time(std::span<const SliceShape> chunk, const StageShape& stage) const;
  // Forward of that many layers again (no β1: it runs inside the backward action), on `rank`
  // (-1: with the shared coefficients).
  double recompute_time(std::span<const SliceShape> chunk, int64_t recompute_layers,
                        int32_t rank = -1) const;

  // Per pipeline rank time coefficients: a rank's stages are timed with rank_coeffs[rank] (a
  // slow rank's actions cost more, so the planner gives it less work); links and memory stay
  // coefficients(). Empty: every rank uses coefficients().
  CostModel with_rank_coefficients(std::vector<Coefficients> rank_coeffs) const;
  const std::vector<Coefficients>& rank_coefficients() const { return rank_coeffs_; }
  // Where each pipeline rank runs (cost/core_sharing.h), for the replay of ranks that share
  // cores; empty: a core for every rank.
  CostModel with_rank_hosts(std::vector<RankHost> hosts) const;
  const std::vector<RankHost>& rank_hosts() const { return rank_hosts_; }
  // Measured links between the pipeline's ranks (cost/pipeline_links.h); empty: transfers use
  // the intra- and inter-node coefficients.
  CostModel with_pipeline_links(PipelineLinks links) const;
  const PipelineLinks& pipeline_links() const { return links_; }
  // The measured hosts of the whole job and their links (cost/host_link_table.h), from which
  // each replica's pipeline links and each stage's all-reduce are priced; empty: the
  // coefficients' intra- and inter-node links.
  CostModel with_host_links(HostLinkTable table) const;
  const HostLinkTable& host_links() const { return host_links_; }
  // With host links: the model replica `replica` plans with, its pipeline links from the table
  // (host_pipeline_links). Without: this model.
  CostModel with_replica_links(const RankGrid& grid, int64_t replica) const;
  // The same model with other time and memory coefficients: its measured links (pipeline and
  // host links) stay; per-rank coefficients and the ranks' hosts do not.
  CostModel with_coefficients(const Coefficients& coeffs) const;
  // A transfer from pipeline rank `from` to `to`: over their measured link when there is one,
  // else p2p_time(bytes, inter_node).
  double p2p_time_between(int64_t bytes, int32_t from, int32_t to, bool inter_node) const;
  // The coefficients that time `rank`'s stages.
  const Coefficients& time_coefficients(int32_t rank) const;
  int64_t p2p_bytes(std::span<const SliceShape> chunk) const;  // activation or its gradient
  // One call of a collective over a group, from the coefficients' table (CollectiveTable::time).
  double collective_time(Collective op, const DeviceGroup& g, double bytes) const;
  // A send/recv between two devices on one node or on two.
  double p2p_time(int64_t bytes, bool inter_node) const;
  // The four all-to-alls of one layer's forward over the Ulysses group; 0 when degree 1.
  double ulysses_alltoall_time(int64_t tokens) const;
  // The causal-attention part of one layer's forward compute (α1 term), seconds on one device.
  double attention_seconds(std::span<const SliceShape> chunk) const;
  // One layer's forward compute (no β1, no all-to-alls), and the LM head's forward (0 on a stage
  // without it): what a ZeRO-3 gather of the next layer can hide behind.
  // `c` is time_coefficients(stage.rank) for the stage that runs them.
  double layer_seconds(std::span<const SliceShape> chunk, const Coefficients& c) const;
  double lm_head_seconds(std::span<const SliceShape> chunk, const StageShape& stage,
                         const Coefficients& c) const;

  // Bytes on one device of the stage.
  // Weights + grads + optimizer (Adam m, v); zero_shard divides the optimizer part by dp.
  int64_t static_bytes(const StageShape& stage, int64_t dp, bool zero_shard) const;
  // Held from a chunk's forward until its backward; recomputed layers keep only their input.
  // K/V of non-final slices are NOT included: they are in kv_keep_bytes (add the two).
  int64_t activation_bytes(std::span<const SliceShape> chunk, const StageShape& stage,
                           int64_t recompute_layers) const;
  // K/V of non-final slices (final_slice == false), all layers of the stage, held from the
  // slice's forward until its backward even for recomputed layers.
  int64_t kv_keep_bytes(std::span<const SliceShape> chunk, const StageShape& stage) const;
  // dK/dV for the `context` tokens before each slice: allocated by this chunk's backward and
  // held until the previous slice's backward of the same sequence consumes it.
  int64_t dkv_buffer_bytes(std::span<const SliceShape> chunk, const StageShape& stage) const;
  // Working set while a forward runs (freed at its end): unsaved temporaries, and a block of
  // logits on the last stage.
  int64_t forward_transient_bytes(std::span<const SliceShape> chunk, const StageShape& stage) const;
  // Working set while a backward runs: activation-gradient buffers, attention workspace, one
  // layer's recomputed activations when EVERY layer is recomputed (otherwise the top layer's
  // freed stash makes room for the recompute first), a block of logits and its gradient on the
  // last stage. dK/dV buffers for context tokens are dkv_buffer_bytes, on top.
  int64_t backward_transient_bytes(std::span<const SliceShape> chunk, const StageShape& stage,
                                   int64_t recompute_layers) const;

  // Megatron-LM's FLOPs formula with causal attention, forward only, whole model replica work
  // (not divided by the Ulysses degree). Backward is 2× this.
  double flops(std::span<const SliceShape> chunk, int64_t num_layers, bool lm_head) const;

 private:
  // Forward of the stage's layers and embedding.
  double stage_compute_seconds(std::span<const SliceShape> chunk, const StageShape& stage,
                               const Coefficients& c) const;
  double efficiency(std::span<const SliceShape> chunk, const Coefficients& c) const;

  ModelConfig model_;
  DeviceSpec device_;
  Coefficients coeffs_;
  std::vector<Coefficients> rank_coeffs_;  // per pipeline rank; empty = coeffs_ everywhere
  std::vector<RankHost> rank_hosts_;       // per pipeline rank; empty = a core each
  PipelineLinks links_;                    // measured; empty = coefficients' links
  HostLinkTable host_links_;               // measured; empty = coefficients' links
  int64_t ulysses_degree_ = 1;
  int64_t ulysses_per_node_ = 0;  // the Ulysses group's devices on a node; 0: all of them
  bool bf16_ = false;
};

int64_t chunk_tokens(std::span<const SliceShape> chunk);

}  // namespace infinipipe::cost
