// The Plan: the chunks of one global batch (one dp replica), the per-rank action lists and the
// cost model's predictions. A plain value (docs/architecture.md, "the plan is data"): the
// simulator, the runtime and the report all consume it; plan_json.h saves and loads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost/core_sharing.h"
#include "cost/cost_model.h"

namespace infinipipe::plan {

// Tokens [offset, offset+len) of sequence `seq` (index into Plan::seq_lengths). The offset is
// the slice's context: it attends to the K/V of the seq's earlier tokens.
struct Slice {
  int32_t seq = 0;
  int64_t offset = 0;
  int64_t len = 0;
  int64_t seq_len = 0;

  bool is_whole() const { return offset == 0 && len == seq_len; }
  bool is_tail() const { return offset > 0 && offset + len == seq_len; }  // last slice of a cut seq
  bool is_split() const { return offset + len < seq_len; }                // a non-final slice
  int64_t end() const { return offset + len; }
};

// batched: whole sequences only; split: exactly one non-final slice; hybrid: one tail slice plus
// zero or more whole sequences. Other mixes are malformed (validate() rejects them).
enum class ChunkKind { batched, split, hybrid };
const char* chunk_kind_name(ChunkKind k);

struct Chunk {
  int32_t id = 0;  // index into Plan::chunks
  std::vector<Slice> slices;

  // split if any slice is non-final, else hybrid if any is a tail, else batched.
  ChunkKind kind() const;
  int64_t tokens() const;
  std::vector<cost::SliceShape> shapes() const;  // {offset, len, final = !is_split()}
};

enum class ActionKind : uint8_t { forward, backward };
const char* action_kind_name(ActionKind k);

struct Action {
  ActionKind kind = ActionKind::forward;
  int32_t chunk = 0;
  int32_t stage = 0;  // global (virtual) stage index 0..pp*vpp-1
  // How many of the stage's layers are recomputed in this chunk's backward; the forward carries
  // the same value (it then keeps only those layers' inputs instead of all activations).
  int32_t recompute_layers = 0;
  double predicted_time = 0;  // cost model seconds (backward: includes its recompute)
};

// Where an action's input comes from and its output goes (sends and receives are implied by the
// action lists): a forward receives the activation from stage-1 and sends to stage+1, a backward
// receives the gradient from stage+1 and sends to stage-1. -1 = none (first / last stage); the
// peer may be the action's own rank when virtual stages put neighbours on one rank (pp = 1).
struct ActionPeers {
  int32_t recv_stage = -1, recv_rank = -1;
  int32_t send_stage = -1, send_rank = -1;
};

struct StageSpec {
  int32_t index = 0;  // global (virtual) stage index, model order
  int32_t rank = 0;   // pipeline rank = index % pp
  int64_t first_layer = 0;
  int64_t num_layers = 0;
  bool has_embedding = false;
  bool has_lm_head = false;
};

struct Plan {
  int32_t version = 1;
  std::string schedule;  // "gpipe" | "1f1b" | "interleaved" | "seq1f1b" | "epp"
  int32_t pp = 1, vpp = 1;
  std::vector<int64_t> seq_lengths;  // sequences of this batch (one dp replica); Slice::seq indexes
  std::vector<Chunk> chunks;         // in the order their forwards enter the pipeline
  std::vector<int32_t> pipeline_of_chunk;     // EPP: consecutive 1F1B pipeline of a chunk (else 0)
  std::vector<StageSpec> stages;              // pp*vpp, model order; stage s lives on rank s % pp
  std::vector<std::vector<Action>> actions;   // per rank (pp lists), in execution order
  std::vector<int64_t> predicted_peak_bytes;  // per rank
  double predicted_step_time = 0;
  int64_t memory_budget = 0;  // bytes per rank; 0 = unchecked
  // Per pipeline rank, the time terms (cost::OnlineTerm order) its actions were predicted with,
  // when ranks have costs of their own (plan_costs.h); empty: one set of coefficients for all.
  std::vector<std::vector<double>> rank_time_terms;
  // Per pipeline rank, its costs outside the actions ({action gap, step tail} seconds,
  // plan_costs.h) the step time was predicted with; empty: none.
  std::vector<std::vector<double>> rank_step_terms;
  // Per pipeline rank, the node it runs on with that node's cores and ranks, as the runtime
  // measured them (cost/core_sharing.h); where a node holds more ranks than cores the replay
  // shares its cores among the ranks computing, and each action's predicted_time is its wall
  // time in that replay. Empty: every rank has a core of its own.
  std::vector<cost::RankHost> rank_hosts;
  // An evaluation plan (forward_plan.h): forwards only, no recompute, nothing kept for backward.
  bool forward_only = false;

  int32_t num_stages() const { return pp * vpp; }
  int32_t rank_of_stage(int32_t stage) const { return stage % pp; }
  int64_t num_tokens() const;     // sum of seq_lengths
  int32_t num_pipelines() const;  // 1 + max(pipeline_of_chunk), 1 if empty
  ActionPeers peers(const Action& a) const;
};

}  // namespace infinipipe::plan
