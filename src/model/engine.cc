#include "model/engine.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/error.h"
#include "model/attention.h"
#include "model/classifier.h"
#include "model/engine_stash.h"
#include "model/kernels.h"
#include "model/matmul.h"

namespace infinipipe {

int64_t ChunkInput::num_tokens() const {
  int64_t n = 0;
  for (const SliceInput& s : slices) n += s.len;
  return n;
}

StageEngine::StageEngine(const ModelConfig& cfg, StageRange range, uint64_t seed,
                         MemoryTracker& tracker)
    : cfg_(cfg), range_(range), tracker_(tracker) {
  params_ = std::make_unique<ModelParams>(cfg, range, seed, tracker);
  inv_freq_.resize(static_cast<size_t>(cfg.head_dim() / 2));
  rope_inv_freq(inv_freq_.data(), cfg.head_dim(), cfg.rotary_base);
}

StageEngine::~StageEngine() = default;

size_t StageEngine::num_stashed_chunks() const {
  return chunks_.size();
}

int64_t StageEngine::stash_bytes(int32_t chunk_id) const {
  auto it = chunks_.find(chunk_id);
  if (it == chunks_.end()) return 0;
  int64_t b = it->second->dx_head.bytes() + it->second->index_bytes;
  for (const LayerStash& l : it->second->layers) b += l.bytes();
  return b;
}

StashBreakdown StageEngine::stash_breakdown(const ModelConfig& cfg) {
  const int64_t C = cfg.hidden_size, F = cfg.ffn_size(), NH = cfg.num_attention_heads;
  const int64_t Q = NH * cfg.head_dim(), KV = cfg.kv_heads() * cfg.head_dim();
  const int64_t f = sizeof(float);
  StashBreakdown b{};
  b.full_per_token_layer = (4 * C + 2 * Q + NH + 2 + 2 * F) * f;
  b.recompute_per_token_layer = C * f;
  b.kv_per_token_layer = 2 * KV * f;
  b.head_per_token = C * f;
  b.index_per_token = sizeof(int64_t) + sizeof(int32_t);
  b.workspace_backward_per_token = (2 * F + C + 2 * Q) * f;
  return b;
}

std::vector<AttnSegment> StageEngine::slice_segments(const Chunk& c, size_t s, int64_t l) {
  const SliceInput& sl = c.slices[s];
  const int64_t KV = cfg_.kv_heads() * cfg_.head_dim();
  std::vector<AttnSegment> segs;
  for (const SliceRef& r : sequences_.at(sl.seq_id)) {
    if (r.offset > sl.offset) break;
    LayerStash& ls = chunks_.at(r.chunk_id)->layers[static_cast<size_t>(l)];
    if (ls.k.empty()) {
      fail("engine: K/V of sequence {} tokens [{}, {}) at layer {} were dropped; this is a bug",
           sl.seq_id, r.offset, r.offset + r.len, range_.first_layer + l);
    }
    AttnSegment seg{};
    seg.k = ls.k.data() + r.row0 * KV;
    seg.v = ls.v.data() + r.row0 * KV;
    seg.dk = ls.dk.empty() ? nullptr : ls.dk.data() + r.row0 * KV;
    seg.dv = ls.dv.empty() ? nullptr : ls.dv.data() + r.row0 * KV;
    seg.len = r.len;
    seg.ld = KV;
    segs.push_back(seg);
  }
  return segs;
}

void StageEngine::kv_grads_ensure(const Chunk& c, size_t s, int64_t l) {
  for (const SliceRef& r : sequences_.at(c.slices[s].seq_id)) {
    if (r.offset > c.slices[s].offset) break;
    LayerStash& ls = chunks_.at(r.chunk_id)->layers[static_cast<size_t>(l)];
    if (ls.dk.empty()) {
      ls.dk = Tensor(tracker_, kAct, ls.k.shape());
      ls.dv = Tensor(tracker_, kAct, ls.v.shape());
    }
  }
}

Tensor StageEngine::layer_forward(Chunk& c, int64_t l, bool keep_all, bool want_output) {
  LayerStash& ls = c.layers[static_cast<size_t>(l)];
  LayerParams& w = params_->layer(l);
  const int64_t N = c.N, C = cfg_.hidden_size, F = cfg_.ffn_size();
  const int64_t NH = cfg_.num_attention_heads, KVH = cfg_.kv_heads(), HS = cfg_.head_dim();
  const int64_t Q = NH * HS, KV = KVH * HS;
  const float eps = static_cast<float>(cfg_.norm_epsilon);

  // attention block: ln1 = norm(x); q,k,v = ln1·Wᵀ; RoPE; att = attention; xmid = x + att·Woᵀ
  ls.rstd1 = Tensor(tracker_, kAct, {N}, false);
  ls.ln1 = Tensor(tracker_, kAct, {N, C}, false);
  rmsnorm_forward(ls.ln1.data(), ls.rstd1.data(), ls.x.data(), w.input_norm->value.data(), N, C,
                  eps);
  ls.q = Tensor(tracker_, kAct, {N, Q}, false);
  matmul_forward(ls.q.data(), ls.ln1.data(), w.wq->value.data(), N, C, Q);
  rope_forward(ls.q.data(), c.pos.data(), inv_freq_.data(), N, NH, HS);
  if (ls.k.empty()) {  // kept K/V are reused as they are: later slices already attended to them
    ls.k = Tensor(tracker_, kAct, {N, KV}, false);
    ls.v = Tensor(tracker_, kAct, {N, KV}, false);
    matmul_forward(ls.k.data(), ls.ln1.data(), w.wk->value.data(), N, C, KV);
    matmul_forward(ls.v.data(), ls.ln1.data(), w.wv->value.data(), N, C, KV);
    rope_forward(ls.k.data(), c.pos.data(), inv_freq_.data(), N, KVH, HS);
  }
  ls.att = Tensor(tracker_, kAct, {N, Q}, false);
  ls.lse = Tensor(tracker_, kAct, {N, NH}, false);
  {
    int64_t tmax = 0;
    for (const SliceInput& s : c.slices) tmax = std::max(tmax, s.len);
    Tensor ws(tracker_, kWs, {attention_workspace_floats({tmax, NH, KVH, HS})}, false);
    for (size_t s = 0; s < c.slices.size(); ++s) {
      const int64_t r0 = c.row0[s];
      std::vector<AttnSegment> segs = slice_segments(c, s, l);
      attention_forward(ls.att.data() + r0 * Q, Q, ls.lse.data() + r0 * NH, ls.q.data() + r0 * Q, Q,
                        segs, {c.slices[s].len, NH, KVH, HS}, ws.data());
    }
  }
  ls.xmid = ls.x.clone(kAct);
  gemm_f32(false, true, N, C, Q, 1.0f, ls.att.data(), Q, w.wo->value.data(), Q, 1.0f,
           ls.xmid.data(), C);

  // MLP block: ln2 = norm(xmid); out = xmid + (silu(ln2·Wgᵀ) ∘ ln2·Wuᵀ)·Wdᵀ
  ls.rstd2 = Tensor(tracker_, kAct, {N}, false);
  ls.ln2 = Tensor(tracker_, kAct, {N, C}, false);
  rmsnorm_forward(ls.ln2.data(), ls.rstd2.data(), ls.xmid.data(), w.post_norm->value.data(), N, C,
                  eps);
  ls.gate = Tensor(tracker_, kAct, {N, F}, false);
  ls.up = Tensor(tracker_, kAct, {N, F}, false);
  matmul_forward(ls.gate.data(), ls.ln2.data(), w.wgate->value.data(), N, C, F);
  matmul_forward(ls.up.data(), ls.ln2.data(), w.wup->value.data(), N, C, F);
  Tensor out;
  if (want_output) {
    Tensor h(tracker_, kWs, {N, F}, false);
    swiglu_forward(h.data(), ls.gate.data(), ls.up.data(), N, F);
    out = ls.xmid.clone(kAct);
    gemm_f32(false, true, N, C, F, 1.0f, h.data(), F, w.wdown->value.data(), F, 1.0f, out.data(),
             C);
  }
  if (!keep_all) {
    for (Tensor* t : {&ls.rstd1, &ls.ln1, &ls.q, &ls.att, &ls.lse, &ls.xmid, &ls.rstd2, &ls.ln2,
                      &ls.gate, &ls.up}) {
      t->reset();
    }
    if (!c.keep_kv) {
      ls.k.reset();
      ls.v.reset();
    }
  }
  return out;
}

void StageEngine::layer_backward(Chunk& c, int64_t l, float* dx, BackwardWorkspace& ws) {
  // dx (N,C): grad of the layer output on entry, of the layer input on exit.
  LayerStash& ls = c.layers[static_cast<size_t>(l)];
  LayerParams& w = params_->layer(l);
  const int64_t N = c.N, C = cfg_.hidden_size, F = cfg_.ffn_size();
  const int64_t NH = cfg_.num_attention_heads, KVH = cfg_.kv_heads(), HS = cfg_.head_dim();
  const int64_t Q = NH * HS, KV = KVH * HS;

  // MLP block. h is recomputed from gate and up rather than stashed.
  swiglu_forward(ws.h.data(), ls.gate.data(), ls.up.data(), N, F);
  matmul_backward(ws.dh.data(), w.wdown->grad.data(), dx, ws.h.data(), w.wdown->value.data(), N, F,
                  C);
  float* dgate = ws.h.data();  // h is no longer needed
  float* dup = ws.dh.data();   // in place over dh
  swiglu_backward(dgate, dup, ws.dh.data(), ls.gate.data(), ls.up.data(), N, F);
  matmul_backward(ws.dln.data(), w.wgate->grad.data(), dgate, ls.ln2.data(), w.wgate->value.data(),
                  N, C, F);
  matmul_backward(ws.dln.data(), w.wup->grad.data(), dup, ls.ln2.data(), w.wup->value.data(), N, C,
                  F, true);
  rmsnorm_backward(dx, w.post_norm->grad.data(), ws.dln.data(), ls.xmid.data(),
                   w.post_norm->value.data(), ls.rstd2.data(), N, C);

  // Attention block. dx is now the grad of xmid.
  matmul_backward(ws.datt.data(), w.wo->grad.data(), dx, ls.att.data(), w.wo->value.data(), N, Q,
                  C);
  for (size_t s = 0; s < c.slices.size(); ++s) kv_grads_ensure(c, s, l);
  for (size_t s = 0; s < c.slices.size(); ++s) {
    const int64_t r0 = c.row0[s];
    std::vector<AttnSegment> segs = slice_segments(c, s, l);
    attention_backward(ws.dq.data() + r0 * Q, Q, segs, ws.datt.data() + r0 * Q, Q,
                       ls.q.data() + r0 * Q, Q, ls.att.data() + r0 * Q, Q, ls.lse.data() + r0 * NH,
                       {c.slices[s].len, NH, KVH, HS}, ws.attn.data());
  }
  // ls.dk/dv now hold this chunk's K/V grads from its own and all later slices.
  rope_backward(ws.dq.data(), c.pos.data(), inv_freq_.data(), N, NH, HS);
  rope_backward(ls.dk.data(), c.pos.data(), inv_freq_.data(), N, KVH, HS);
  matmul_backward(ws.dln.data(), w.wq->grad.data(), ws.dq.data(), ls.ln1.data(), w.wq->value.data(),
                  N, C, Q);
  matmul_backward(ws.dln.data(), w.wk->grad.data(), ls.dk.data(), ls.ln1.data(), w.wk->value.data(),
                  N, C, KV, true);
  matmul_backward(ws.dln.data(), w.wv->grad.data(), ls.dv.data(), ls.ln1.data(), w.wv->value.data(),
                  N, C, KV, true);
  rmsnorm_backward(dx, w.input_norm->grad.data(), ws.dln.data(), ls.x.data(),
                   w.input_norm->value.data(), ls.rstd1.data(), N, C);
}

void StageEngine::chunk_drop(int32_t chunk_id, bool failed_forward) {
  auto it = chunks_.find(chunk_id);
  if (it == chunks_.end()) return;
  for (const SliceInput& s : it->second->slices) {
    auto seq = sequences_.find(s.seq_id);
    if (seq == sequences_.end()) continue;
    auto& refs = seq->second;
    refs.erase(std::remove_if(refs.begin(), refs.end(),
                              [&](const SliceRef& r) { return r.chunk_id == chunk_id; }),
               refs.end());
    if (refs.empty()) {
      sequences_.erase(seq);
    } else if (failed_forward) {
      refs.back().next_seen = false;  // as if the failed slice never came
    }
  }
  tracker_.release(kAct, it->second->index_bytes);
  chunks_.erase(it);
}

}  // namespace infinipipe
