// Elementwise and row-wise kernels of the Llama layer, forward and backward side by side
// (llm.c style). N = tokens of a chunk, C = hidden, NH/KVH = query/key-value heads, HS = head
// size, F = FFN size, V = vocabulary. Parameter grads accumulate (+=); activation grads assign
// unless a kernel says otherwise.
#pragma once

#include <cstdint>

namespace infinipipe {

// out (N,C) = wte (V,C)[tokens (N)]. Throws if a token is outside [0, V).
void embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N, int64_t C,
                       int64_t V);
// dwte (V,C) += scatter of dout (N,C) by tokens.
void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                        int64_t C);

// out (N,C) = inp · rsqrt(mean(inp²) + eps) · weight (C); rstd (N) kept for backward.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N,
                     int64_t C, float eps);
// dinp (N,C) += ...; dweight (C) += ...  (dinp accumulates: it is a residual stream's grad)
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int64_t N, int64_t C);

// Rotary position embedding, HF apply_rotary_pos_emb with rotate_half: x (N,H,HS) in place,
// token n at position pos[n]. inv_freq (HS/2) from rope_inv_freq.
void rope_inv_freq(float* inv_freq, int64_t HS, double base);
void rope_forward(float* x, const int64_t* pos, const float* inv_freq, int64_t N, int64_t H,
                  int64_t HS);
// dx (N,H,HS) in place: the transpose of the rotation.
void rope_backward(float* dx, const int64_t* pos, const float* inv_freq, int64_t N, int64_t H,
                   int64_t HS);

// h (N,F) = silu(gate) · up
void swiglu_forward(float* h, const float* gate, const float* up, int64_t N, int64_t F);
// dgate, dup (N,F) from dh (N,F); either may alias dh
void swiglu_backward(float* dgate, float* dup, const float* dh, const float* gate, const float* up,
                     int64_t N, int64_t F);

}  // namespace infinipipe
