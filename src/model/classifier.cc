#include "model/classifier.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/matmul.h"
#include "model/parallel.h"

namespace infinipipe {

namespace {

void targets_check(const int32_t* targets, int64_t N, int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] < -1 || targets[n] >= V) {
      fail(
          "label {} at position {} is outside the vocabulary [0, {}); the data does not match "
          "--vocab-size",
          targets[n], n, V);
    }
  }
}

}  // namespace

double classifier_loss(const float* x, const float* W, const int32_t* targets, int64_t N, int64_t C,
                       int64_t V, float* workspace) {
  targets_check(targets, N, V);
  double loss = 0.0;
  for (int64_t n0 = 0; n0 < N; n0 += kClassifierBlock) {
    const int64_t B = std::min(kClassifierBlock, N - n0);
    float* logits = workspace;  // (B,V)
    gemm_f32(false, true, B, V, C, 1.0f, x + n0 * C, C, W, C, 0.0f, logits, V);
#pragma omp parallel for schedule(static) reduction(+ : loss) if (B * V >= kOmpMinWork)
    for (int64_t b = 0; b < B; ++b) {
      const float* row = logits + b * V;
      const int32_t t = targets[n0 + b];
      if (t < 0) continue;  // no label: contributes nothing
      float mx = row[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, row[v]);
      // The same float exponentials, summed in double, as the training loss.
      double sum = 0.0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
      loss += std::log(sum) - (static_cast<double>(row[t]) - mx);
    }
  }
  return loss;
}

double classifier_forward_backward(float* dx, float* dW, const float* x, const float* W,
                                   const int32_t* targets, int64_t N, int64_t C, int64_t V,
                                   float loss_scale, float* workspace) {
  targets_check(targets, N, V);
  double loss = 0.0;
  for (int64_t n0 = 0; n0 < N; n0 += kClassifierBlock) {
    const int64_t B = std::min(kClassifierBlock, N - n0);
    float* logits = workspace;  // (B,V), becomes dlogits in place
    // logits (B,V) = x (B,C) · W (V,C)^T
    gemm_f32(false, true, B, V, C, 1.0f, x + n0 * C, C, W, C, 0.0f, logits, V);
#pragma omp parallel for schedule(static) reduction(+ : loss) if (B * V >= kOmpMinWork)
    for (int64_t b = 0; b < B; ++b) {
      float* row = logits + b * V;
      const int32_t t = targets[n0 + b];
      if (t < 0) {  // no label: contributes nothing
        std::fill(row, row + V, 0.0f);
        continue;
      }
      float mx = row[0];
      for (int64_t v = 1; v < V; ++v) mx = std::max(mx, row[v]);
      const double target_logit = static_cast<double>(row[t]) - mx;
      double sum = 0.0;
      for (int64_t v = 0; v < V; ++v) {
        row[v] = std::exp(row[v] - mx);
        sum += row[v];
      }
      loss += std::log(sum) - target_logit;
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t v = 0; v < V; ++v) row[v] *= inv * loss_scale;  // softmax · scale
      row[t] -= loss_scale;
    }
    // dx (B,C) = dlogits (B,V) · W (V,C);  dW (V,C) += dlogits^T (V,B) · x (B,C)
    gemm_f32(false, false, B, C, V, 1.0f, logits, V, W, C, 0.0f, dx + n0 * C, C);
    gemm_f32(true, false, V, C, B, 1.0f, logits, V, x + n0 * C, C, 1.0f, dW, C);
  }
  return loss;
}

}  // namespace infinipipe
