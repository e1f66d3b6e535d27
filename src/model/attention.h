// Causal, varlen, grouped-query attention over one slice, blockwise with an online softmax
// (flash-attention style): only the log-sum-exp of each query row is kept, no T×T matrix.
//
// A slice holds T tokens at positions P..P+T−1 of its sequence. Its keys are the K/V of the
// earlier slices of the sequence (the prefix, positions 0..P−1) followed by its own, given as
// segments in position order. Packed sequences are separate slices, so they never meet.
// Shapes: q/out/dq (T,NH,HS), each segment's k/v/dk/dv (len,KVH,HS), lse (T,NH); rows may be
// strided (ld = floats between rows).
#pragma once

#include <cstdint>
#include <span>

namespace infinipipe {

struct AttnSegment {
  const float* k;
  const float* v;
  float* dk;  // backward accumulates (+=) here; unused by the forward
  float* dv;
  int64_t len;
  int64_t ld;
};

struct AttnDims {
  int64_t T;    // queries of the slice
  int64_t NH;   // query heads
  int64_t KVH;  // key/value heads (NH % KVH == 0)
  int64_t HS;   // head size
};

// Floats of workspace both passes need (per-thread tiles, sized for omp_get_max_threads()).
int64_t attention_workspace_floats(const AttnDims& d);

// out = softmax(q·kᵀ/√HS, causal) · v;  lse = log Σ exp(q·kᵀ/√HS) per (query, head).
void attention_forward(float* out, int64_t ldo, float* lse, const float* q, int64_t ldq,
                       std::span<const AttnSegment> kv, const AttnDims& d, float* workspace);

// dq (assign) for the slice; dk/dv of every segment accumulate (+=), so the prefix's K/V grads
// from several later slices sum up.
void attention_backward(float* dq, int64_t lddq, std::span<const AttnSegment> kv, const float* dout,
                        int64_t lddo, const float* q, int64_t ldq, const float* out, int64_t ldo,
                        const float* lse, const AttnDims& d, float* workspace);

}  // namespace infinipipe
