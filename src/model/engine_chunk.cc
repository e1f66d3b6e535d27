// StageEngine::forward / backward of whole chunks: validation, the sequence registry (which
// slices' K/V are live), the stage input/output and the loss. Layers are in engine.cc.
#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "core/error.h"
#include "model/attention.h"
#include "model/classifier.h"
#include "model/engine.h"
#include "model/engine_stash.h"
#include "model/kernels.h"

namespace infinipipe {

ForwardOutput StageEngine::forward(const ChunkInput& chunk, const Tensor* input_activation,
                                   int64_t recompute_layers, double loss_scale) {
  return forward_run(chunk, input_activation, nullptr, recompute_layers, loss_scale);
}

ForwardOutput StageEngine::forward(const ChunkInput& chunk, Tensor&& input_activation,
                                   int64_t recompute_layers, double loss_scale) {
  return forward_run(chunk, input_activation.empty() ? nullptr : &input_activation,
                     &input_activation, recompute_layers, loss_scale);
}

// A chunk may run here when it is not stashed already, recomputes at most the stage's layers,
// brings an input of shape (N, C) unless the stage embeds, and each of its slices continues its
// sequence's live slices (invariant 2 of docs/architecture.md).
void StageEngine::forward_check(const ChunkInput& chunk, const Tensor* input_activation,
                                int64_t recompute_layers) const {
  const int64_t C = cfg_.hidden_size, L = range_.num_layers;
  const int32_t id = chunk.chunk_id;
  if (chunks_.count(id) != 0) {
    fail(
        "engine: chunk {} is already stashed on layers [{}, {}); run its backward before its "
        "next forward",
        id, range_.first_layer, range_.first_layer + L);
  }
  if (chunk.slices.empty()) fail("engine: chunk {} has no slices", id);
  if (recompute_layers < 0 || recompute_layers > L) {
    fail_config("engine: chunk {} asks to recompute {} layers, but the stage has {}", id,
                recompute_layers, L);
  }
  std::set<int64_t> seen;
  for (const SliceInput& s : chunk.slices) {
    forward_check_slice(id, s);
    if (!seen.insert(s.seq_id).second) {
      fail("engine: chunk {} holds two slices of sequence {}; a chunk takes one slice per sequence",
           id, s.seq_id);
    }
  }
  const int64_t N = chunk.num_tokens();
  if (!range_.has_embedding) {
    if (input_activation == nullptr || input_activation->shape() != std::vector<int64_t>{N, C}) {
      fail(
          "engine: chunk {} needs an input activation of shape ({}, {}) on a stage without the "
          "embedding",
          id, N, C);
    }
  }
}

void StageEngine::forward_check_slice(int32_t id, const SliceInput& s) const {
  const int64_t ntok = static_cast<int64_t>(s.tokens.size());
  if (s.len <= 0 || s.offset < 0 || (ntok != s.len && ntok != s.len + 1)) {
    fail(
        "engine: chunk {}: slice of sequence {} has offset {}, length {} and {} tokens; it "
        "needs length ≥ 1 and length or length + 1 tokens",
        id, s.seq_id, s.offset, s.len, ntok);
  }
  if (s.offset + s.len > cfg_.max_positions()) {
    fail_config(
        "engine: sequence {} reaches position {}, beyond max-position-embeddings {}; "
        "raise --seq-length or --max-position-embeddings",
        s.seq_id, s.offset + s.len, cfg_.max_positions());
  }
  auto it = sequences_.find(s.seq_id);
  const int64_t end = it == sequences_.end() ? 0 : it->second.back().offset + it->second.back().len;
  const bool closed = it != sequences_.end() && it->second.back().is_final;
  if (s.offset != end || closed) {
    fail(
        "engine: chunk {}: slice [{}, {}) of sequence {} does not follow the live slices of "
        "that sequence on this stage (they end at {}{}); run a sequence's slice forwards in "
        "order, each once",
        id, s.offset, s.offset + s.len, s.seq_id, end, closed ? ", with its final slice" : "");
  }
}

// The chunk's stash, opened: its slices' positions and tokens (charged as activations), and
// each slice registered as its sequence's newest live slice. targets: (N) each token's label,
// -1 where it predicts nothing.
StageEngine::Chunk& StageEngine::chunk_open(const ChunkInput& chunk, int64_t recompute_layers,
                                            std::vector<int32_t>& targets) {
  auto owned = std::make_unique<Chunk>();
  Chunk& c = *owned;
  c.id = chunk.chunk_id;
  c.N = chunk.num_tokens();
  c.recompute_layers = recompute_layers;
  c.layers.resize(static_cast<size_t>(range_.num_layers));
  targets.reserve(static_cast<size_t>(c.N));
  for (const SliceInput& s : chunk.slices) {
    c.row0.push_back(static_cast<int64_t>(c.pos.size()));
    for (int64_t i = 0; i < s.len; ++i) {
      c.pos.push_back(s.offset + i);
      c.tokens.push_back(s.tokens[static_cast<size_t>(i)]);
      const bool has_label = i + 1 < static_cast<int64_t>(s.tokens.size());
      targets.push_back(has_label ? s.tokens[static_cast<size_t>(i + 1)] : -1);
    }
    if (!s.is_final()) c.keep_kv = true;
    SliceInput meta{s.seq_id, s.offset, s.len, {}};
    c.slices.push_back(meta);
  }
  c.index_bytes =
      static_cast<int64_t>(c.pos.size() * sizeof(int64_t) + c.tokens.size() * sizeof(int32_t));
  tracker_.charge(kAct, c.index_bytes);
  chunks_[c.id] = std::move(owned);
  for (size_t s = 0; s < c.slices.size(); ++s) {
    const SliceInput& in = chunk.slices[s];
    auto& refs = sequences_[in.seq_id];
    if (!refs.empty()) refs.back().next_seen = true;
    refs.push_back({c.id, c.row0[s], in.offset, in.len, in.is_final()});
  }
  return c;
}

// The first layer's input (N, C): the tokens embedded, the received activation taken, or a copy.
Tensor StageEngine::forward_input(const Chunk& c, const Tensor* input_activation,
                                  Tensor* input_owned) {
  const int64_t N = c.N, C = cfg_.hidden_size;
  if (range_.has_embedding) {
    Tensor x(tracker_, kAct, {N, C}, false);
    embedding_forward(x.data(), c.tokens.data(), params_->embedding()->value.data(), N, C,
                      cfg_.vocab_size);
    return x;
  }
  if (input_owned != nullptr) return std::move(*input_owned);
  Tensor x(tracker_, kAct, {N, C}, false);
  std::memcpy(x.data(), input_activation->data(), static_cast<size_t>(x.bytes()));
  return x;
}

// The last stage's loss and its grad now (fused), back through the final norm: only the grad of
// the last layer's output is kept, for backward.
void StageEngine::head_forward_backward(Chunk& c, const Tensor& x,
                                        const std::vector<int32_t>& targets, double loss_scale,
                                        ForwardOutput& result) {
  const int64_t N = c.N, C = cfg_.hidden_size, V = cfg_.vocab_size;
  Param* norm = params_->final_norm();
  Param* head = params_->lm_head();
  Tensor ln(tracker_, kWs, {N, C}, false), rstd(tracker_, kWs, {N}, false);
  rmsnorm_forward(ln.data(), rstd.data(), x.data(), norm->value.data(), N, C,
                  static_cast<float>(cfg_.norm_epsilon));  // ln = rmsnorm(x)
  Tensor dln(tracker_, kWs, {N, C}, false);
  Tensor ws(tracker_, kWs, {kClassifierBlock, V}, false);
  // loss = Σ cross-entropy(ln · headᵀ, targets); dln and dhead scaled by loss_scale
  result.loss_sum = classifier_forward_backward(dln.data(), head->grad.data(), ln.data(),
                                                head->value.data(), targets.data(), N, C, V,
                                                static_cast<float>(loss_scale), ws.data());
  for (int32_t t : targets) result.predicted_tokens += t >= 0 ? 1 : 0;
  c.dx_head = Tensor(tracker_, kAct, {N, C}, true);
  rmsnorm_backward(c.dx_head.data(), norm->grad.data(), dln.data(), x.data(), norm->value.data(),
                   rstd.data(), N, C);  // dx = rmsnorm'(dln)
}

ForwardOutput StageEngine::forward_run(const ChunkInput& chunk, const Tensor* input_activation,
                                       Tensor* input_owned, int64_t recompute_layers,
                                       double loss_scale) {
  forward_check(chunk, input_activation, recompute_layers);
  std::vector<int32_t> targets;
  Chunk& c = chunk_open(chunk, recompute_layers, targets);
  ForwardOutput result;
  try {
    Tensor x = forward_input(c, input_activation, input_owned);  // (N, C)
    for (int64_t l = 0; l < range_.num_layers; ++l) {
      c.layers[static_cast<size_t>(l)].x = std::move(x);     // layer l's input, always stashed
      x = layer_forward(c, l, l >= recompute_layers, true);  // (N, C)
    }
    if (range_.has_lm_head) {
      head_forward_backward(c, x, targets, loss_scale, result);
    } else {
      result.activation = std::move(x);  // (N, C) to the next stage
    }
  } catch (...) {
    chunk_drop(c.id, true);
    throw;
  }
  return result;
}

Tensor StageEngine::backward(int32_t chunk_id, const Tensor* grad_output,
                             const BackwardPartDone& part_done) {
  return backward_run(chunk_id, grad_output, nullptr, part_done);
}

Tensor StageEngine::backward(int32_t chunk_id, Tensor&& grad_output,
                             const BackwardPartDone& part_done) {
  return backward_run(chunk_id, grad_output.empty() ? nullptr : &grad_output, &grad_output,
                      part_done);
}

Tensor StageEngine::backward_run(int32_t chunk_id, const Tensor* grad_output, Tensor* owned,
                                 const BackwardPartDone& part_done) {
  auto it = chunks_.find(chunk_id);
  if (it == chunks_.end()) {
    fail("engine: backward of chunk {} on layers [{}, {}) without its forward", chunk_id,
         range_.first_layer, range_.first_layer + range_.num_layers);
  }
  Chunk& c = *it->second;
  const int64_t N = c.N, C = cfg_.hidden_size, F = cfg_.ffn_size();
  const int64_t NH = cfg_.num_attention_heads, KVH = cfg_.kv_heads(), HS = cfg_.head_dim();
  for (const SliceInput& s : c.slices) {
    const SliceRef& last = sequences_.at(s.seq_id).back();
    if (last.chunk_id != chunk_id) {
      fail(
          "engine: backward of chunk {} before the backward of chunk {}, which holds a later "
          "slice of sequence {}; run a sequence's slice backwards in reverse order",
          chunk_id, last.chunk_id, s.seq_id);
    }
    if (!last.is_final && !last.next_seen) {
      fail(
          "engine: backward of chunk {} before the forward of the next slice of sequence {} "
          "(tokens from {}); the later slices' forwards and backwards come first",
          chunk_id, s.seq_id, last.offset + last.len);
    }
  }
  Tensor dx;
  if (range_.has_lm_head) {
    dx = std::move(c.dx_head);
  } else {
    if (grad_output == nullptr || grad_output->shape() != std::vector<int64_t>{N, C}) {
      fail("engine: backward of chunk {} needs an output grad of shape ({}, {})", chunk_id, N, C);
    }
    dx = owned != nullptr ? std::move(*owned) : grad_output->clone(kAct);
  }

  BackwardWorkspace ws;
  const int64_t Q = NH * HS;
  ws.h = Tensor(tracker_, kWs, {N, F}, false);
  ws.dh = Tensor(tracker_, kWs, {N, F}, false);
  ws.dln = Tensor(tracker_, kWs, {N, C}, false);
  ws.datt = Tensor(tracker_, kWs, {N, Q}, false);
  ws.dq = Tensor(tracker_, kWs, {N, Q}, false);
  int64_t tmax = 0;
  for (const SliceInput& s : c.slices) tmax = std::max(tmax, s.len);
  ws.attn = Tensor(tracker_, kWs, {attention_workspace_floats({tmax, NH, KVH, HS})}, false);

  for (int64_t l = range_.num_layers - 1; l >= 0; --l) {
    if (l < c.recompute_layers) layer_forward(c, l, true, false);  // recompute the stash
    layer_backward(c, l, dx.data(), ws);
    c.layers[static_cast<size_t>(l)] = LayerStash();  // its K/V are no longer needed either
    if (part_done) part_done(l);
  }
  if (range_.has_embedding) {
    embedding_backward(params_->embedding()->grad.data(), dx.data(), c.tokens.data(), N, C);
    dx.reset();
    if (part_done) part_done(kBackwardPartEmbedding);
  }
  chunk_drop(chunk_id);
  return dx;
}

}  // namespace infinipipe
