// The engine a pipeline rank runs for one stage (a range of layers): the forward and backward
// of chunks, with the activation stash, the K/V that later slices of a sequence attend to, the
// dK/dV those slices send back, and per-chunk recomputation. No MPI, no schedule: the caller
// decides the order of actions (forwards of a sequence's slices in order, backwards reversed).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/config.h"
#include "model/memory.h"
#include "model/params.h"

namespace infinipipe {

struct AttnSegment;
struct BackwardWorkspace;

// A contiguous token range [offset, offset + len) of one sequence.
struct SliceInput {
  int64_t seq_id = 0;
  int64_t offset = 0;
  int64_t len = 0;
  // len + 1 tokens (the last is the label of the slice's last token: the first token of the
  // next slice), or len for the final slice of its sequence (its last token predicts nothing).
  std::vector<int32_t> tokens;

  bool is_final() const { return static_cast<int64_t>(tokens.size()) == len; }
};

struct ChunkInput {
  int32_t chunk_id = 0;
  std::vector<SliceInput> slices;  // at most one slice per sequence

  int64_t num_tokens() const;
};

struct ForwardOutput {
  Tensor activation;      // (N,C) for the next stage; empty on the last stage
  double loss_sum = 0.0;  // Σ token losses, unscaled (last stage only)
  int64_t predicted_tokens = 0;
};

// Bytes the engine keeps per token per layer between a chunk's forward and its backward; the
// cost model calibrates its memory terms to these.
struct StashBreakdown {
  // A layer that is not recomputed keeps full + kv bytes per token; a recomputed one keeps
  // recompute bytes, plus kv when its chunk holds a non-final slice (later slices attend to
  // it). A non-final slice gets kv bytes more per layer (dK/dV) once its next slice's backward
  // ran. The transient peak of a backward adds workspace_backward per token.
  int64_t full_per_token_layer;
  int64_t recompute_per_token_layer;
  int64_t kv_per_token_layer;
  int64_t index_per_token;  // positions and token ids of the chunk
  int64_t head_per_token;   // last stage: the grad of the final norm's input
  int64_t workspace_backward_per_token;
};

class StageEngine {
 public:
  StageEngine(const ModelConfig& cfg, StageRange range, uint64_t seed, MemoryTracker& tracker);
  ~StageEngine();
  StageEngine(const StageEngine&) = delete;
  StageEngine& operator=(const StageEngine&) = delete;

  ModelParams& params() { return *params_; }
  const ModelConfig& config() const { return cfg_; }
  const StageRange& range() const { return range_; }

  // Runs the chunk through the stage's layers. input_activation (N,C) is required unless the
  // stage embeds tokens. The first recompute_layers layers keep only their input (and the K/V
  // later slices need) and are recomputed in backward. On the last stage the loss is computed
  // and its gradient, scaled by loss_scale (1 / predicted tokens of the global batch), is
  // accumulated into the LM head / final norm now and kept for backward.
  ForwardOutput forward(const ChunkInput& chunk, const Tensor* input_activation,
                        int64_t recompute_layers, double loss_scale);
  // The same, taking the received input itself (empty on the embedding stage): it becomes the
  // first layer's stashed input, so no copy and no second buffer while the chunk runs.
  ForwardOutput forward(const ChunkInput& chunk, Tensor&& input_activation,
                        int64_t recompute_layers, double loss_scale);

  // Evaluation (engine_eval.cc): the chunk's forward without gradients, recompute or anything
  // kept for a backward. The last stage returns the loss sum; the others the activation. A slice
  // whose sequence has later slices keeps its K/V (they attend to it) until the sequence's final
  // slice ran here; then every chunk of that sequence is released.
  ForwardOutput forward_eval(const ChunkInput& chunk, Tensor&& input_activation);

  // Called inside backward once a part of the stage has accumulated its parameter gradients for
  // the chunk: the stage-local layer index, or kBackwardPartEmbedding after the embedding. Lets
  // a caller start reducing gradients that are final while earlier layers still run (the model
  // knows nothing of how). The LM head and final norm accumulate in forward, so never appear.
  using BackwardPartDone = std::function<void(int64_t part)>;
  static constexpr int64_t kBackwardPartEmbedding = -1;

  // Backward of a stashed chunk; grad_output (N,C) is required unless this is the last stage.
  // Returns the grad of the stage input (N,C), or an empty tensor on the first stage.
  // Parameter grads accumulate.
  Tensor backward(int32_t chunk_id, const Tensor* grad_output,
                  const BackwardPartDone& part_done = {});
  // The same, taking the received output grad itself (empty on the last stage) as the running
  // gradient buffer instead of a copy of it.
  Tensor backward(int32_t chunk_id, Tensor&& grad_output, const BackwardPartDone& part_done = {});

  size_t num_stashed_chunks() const;
  int64_t stash_bytes(int32_t chunk_id) const;  // activations held for the chunk right now
  static StashBreakdown stash_breakdown(const ModelConfig& cfg);

  struct Chunk;  // the stash of one chunk (engine_stash.h)

 private:
  // One live slice of a sequence: where its K/V (and their grads) are.
  struct SliceRef {
    int32_t chunk_id;
    int64_t row0;  // first row of the slice in its chunk
    int64_t offset;
    int64_t len;
    bool is_final;
    bool next_seen = false;  // the next slice of the sequence ran its forward here
  };

  // owned: the caller's input buffer to take instead of copying (null: copy).
  ForwardOutput forward_run(const ChunkInput& chunk, const Tensor* input_activation,
                            Tensor* input_owned, int64_t recompute_layers, double loss_scale);
  void forward_check(const ChunkInput& chunk, const Tensor* input_activation,
                     int64_t recompute_layers) const;
  void forward_check_slice(int32_t chunk_id, const SliceInput& s) const;
  Chunk& chunk_open(const ChunkInput& chunk, int64_t recompute_layers,
                    std::vector<int32_t>& targets);
  Tensor forward_input(const Chunk& c, const Tensor* input_activation, Tensor* input_owned);
  void head_forward_backward(Chunk& c, const Tensor& x, const std::vector<int32_t>& targets,
                             double loss_scale, ForwardOutput& result);
  Tensor backward_run(int32_t chunk_id, const Tensor* grad_output, Tensor* owned,
                      const BackwardPartDone& part_done);
  Tensor layer_forward(Chunk& c, int64_t l, bool keep_all, bool want_output);
  void layer_backward(Chunk& c, int64_t l, float* dx, BackwardWorkspace& ws);
  std::vector<AttnSegment> slice_segments(const Chunk& c, size_t s, int64_t l);
  void kv_grads_ensure(const Chunk& c, size_t s, int64_t l);
  void chunk_drop(int32_t chunk_id, bool failed_forward = false);
  double head_loss(Chunk& c, const Tensor& x, const std::vector<int32_t>& targets);
  void eval_release(int32_t chunk_id);

  ModelConfig cfg_;
  StageRange range_;
  MemoryTracker& tracker_;
  std::unique_ptr<ModelParams> params_;
  std::vector<float> inv_freq_;
  std::map<int32_t, std::unique_ptr<Chunk>> chunks_;
  std::map<int64_t, std::vector<SliceRef>> sequences_;  // live slices per sequence, by offset
};

}  // namespace infinipipe
