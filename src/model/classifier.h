// Fused LM head + softmax + cross-entropy, forward and backward in one pass over blocks of
// tokens, so the logits of a long chunk are never all in memory (llm.c's fused classifier).
#pragma once

#include <cstdint>

namespace infinipipe {

// Tokens per block of logits: the workspace is kClassifierBlock × V floats.
inline constexpr int64_t kClassifierBlock = 256;

// x (N,C): final-norm output; W (V,C): LM head; targets (N): next token, or −1 for none.
// Returns Σ −log softmax(x·Wᵀ)[target] over tokens with a target (in double).
// Writes dx (N,C) = loss_scale · ∂loss/∂x (assign) and accumulates dW (V,C) += loss_scale · ∂/∂W.
// workspace: kClassifierBlock × V floats.
double classifier_forward_backward(float* dx, float* dW, const float* x, const float* W,
                                   const int32_t* targets, int64_t N, int64_t C, int64_t V,
                                   float loss_scale, float* workspace);

// The same loss without any gradient (evaluation): Σ −log softmax(x·Wᵀ)[target], in double.
double classifier_loss(const float* x, const float* W, const int32_t* targets, int64_t N, int64_t C,
                       int64_t V, float* workspace);

}  // namespace infinipipe
