#include "model/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/fast_math.h"
#include "model/parallel.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace infinipipe {

void embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N, int64_t C,
                       int64_t V) {
  for (int64_t n = 0; n < N; ++n) {
    if (tokens[n] < 0 || tokens[n] >= V) {
      fail(
          "token id {} at position {} is outside the vocabulary [0, {}); the data does not match "
          "--vocab-size",
          tokens[n], n, V);
    }
  }
#pragma omp parallel for schedule(static) if (N * C >= kOmpMinWork)
  for (int64_t n = 0; n < N; ++n) {
    std::memcpy(out + n * C, wte + static_cast<int64_t>(tokens[n]) * C, sizeof(float) * C);
  }
}

void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                        int64_t C) {
  // Rows may repeat, so parallelise over channels: each thread owns a column range.
#pragma omp parallel if (N * C >= kOmpMinWork)
  {
    int nt = 1, t = 0;
#ifdef _OPENMP
    nt = omp_get_num_threads();
    t = omp_get_thread_num();
#endif
    int64_t c0 = C * t / nt, c1 = C * (t + 1) / nt;
    for (int64_t n = 0; n < N; ++n) {
      float* d = dwte + static_cast<int64_t>(tokens[n]) * C;
      const float* g = dout + n * C;
      for (int64_t c = c0; c < c1; ++c) d[c] += g[c];
    }
  }
}

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N,
                     int64_t C, float eps) {
#pragma omp parallel for schedule(static) if (N * C >= kOmpMinWork)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    float* o = out + n * C;
    float ss = 0.0f;
    for (int64_t c = 0; c < C; ++c) ss += x[c] * x[c];
    float r = 1.0f / std::sqrt(ss / static_cast<float>(C) + eps);
    for (int64_t c = 0; c < C; ++c) o[c] = x[c] * r * weight[c];
    rstd[n] = r;
  }
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int64_t N, int64_t C) {
  // y = w·x·r, r = (mean(x²)+eps)^-½ ⇒ dx = r·(w·dy) − x·r³/C · Σ(w·dy·x)
#pragma omp parallel for schedule(static) if (N * C >= kOmpMinWork)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float* dy = dout + n * C;
    float* dx = dinp + n * C;
    const float r = rstd[n];
    float dot = 0.0f;
    for (int64_t c = 0; c < C; ++c) dot += weight[c] * dy[c] * x[c];
    const float k = dot * r * r * r / static_cast<float>(C);
    for (int64_t c = 0; c < C; ++c) dx[c] += r * weight[c] * dy[c] - k * x[c];
  }
  // dweight over tokens: parallel over channels to avoid races.
#pragma omp parallel for schedule(static) if (N * C >= kOmpMinWork)
  for (int64_t c = 0; c < C; ++c) {
    float acc = 0.0f;
    for (int64_t n = 0; n < N; ++n) acc += dout[n * C + c] * inp[n * C + c] * rstd[n];
    dweight[c] += acc;
  }
}

void rope_inv_freq(float* inv_freq, int64_t HS, double base) {
  // As HF computes it: 1 / base^(2i/HS) in fp32.
  for (int64_t i = 0; i < HS / 2; ++i) {
    float e = static_cast<float>(2 * i) / static_cast<float>(HS);
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(base), e);
  }
}

namespace {

// Rotates x (N,H,HS) by +angle (sign = 1) or −angle (sign = −1, the backward).
void rope_apply(float* x, const int64_t* pos, const float* inv_freq, int64_t N, int64_t H,
                int64_t HS, float sign) {
  const int64_t half = HS / 2;
#pragma omp parallel for schedule(static) if (N * H * HS >= kOmpMinWork)
  for (int64_t n = 0; n < N; ++n) {
    float cs[512], sn[512];  // HS/2 ≤ 512 is checked below
    const float p = static_cast<float>(pos[n]);
    for (int64_t i = 0; i < half; ++i) {
      float a = p * inv_freq[i];  // fp32 like HF
      cs[i] = std::cos(a);
      sn[i] = sign * std::sin(a);
    }
    for (int64_t h = 0; h < H; ++h) {
      float* v = x + (n * H + h) * HS;
      for (int64_t i = 0; i < half; ++i) {
        float a = v[i], b = v[i + half];
        v[i] = a * cs[i] - b * sn[i];
        v[i + half] = b * cs[i] + a * sn[i];
      }
    }
  }
}

}  // namespace

void rope_forward(float* x, const int64_t* pos, const float* inv_freq, int64_t N, int64_t H,
                  int64_t HS) {
  if (HS > 1024) fail("rope: head size {} is above the supported 1024", HS);
  rope_apply(x, pos, inv_freq, N, H, HS, 1.0f);
}

void rope_backward(float* dx, const int64_t* pos, const float* inv_freq, int64_t N, int64_t H,
                   int64_t HS) {
  if (HS > 1024) fail("rope: head size {} is above the supported 1024", HS);
  rope_apply(dx, pos, inv_freq, N, H, HS, -1.0f);
}

// Elementwise loops of the MLP go in blocks so exp runs vectorised over a small buffer.
constexpr int64_t kSwigluBlock = 512;

void swiglu_forward(float* h, const float* gate, const float* up, int64_t N, int64_t F) {
  const int64_t total = N * F, blocks = (total + kSwigluBlock - 1) / kSwigluBlock;
#pragma omp parallel for schedule(static) if (total >= kOmpMinWork)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i0 = b * kSwigluBlock, n = std::min(kSwigluBlock, total - i0);
    float e[kSwigluBlock] = {};  // (initialised only to quiet -Wmaybe-uninitialized)
    exp_neg(e, gate + i0, n);
    for (int64_t i = 0; i < n; ++i) h[i0 + i] = gate[i0 + i] / (1.0f + e[i]) * up[i0 + i];
  }
}

void swiglu_backward(float* dgate, float* dup, const float* dh, const float* gate, const float* up,
                     int64_t N, int64_t F) {
  // silu'(g) = σ(g)·(1 + g·(1 − σ(g)))
  const int64_t total = N * F, blocks = (total + kSwigluBlock - 1) / kSwigluBlock;
#pragma omp parallel for schedule(static) if (total >= kOmpMinWork)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i0 = b * kSwigluBlock, n = std::min(kSwigluBlock, total - i0);
    float e[kSwigluBlock] = {};  // (initialised only to quiet -Wmaybe-uninitialized)
    exp_neg(e, gate + i0, n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = i0 + i;
      const float g = gate[j], d = dh[j], u = up[j];  // read first: dup or dgate may alias dh
      const float s = 1.0f / (1.0f + e[i]);
      dup[j] = d * g * s;
      dgate[j] = d * u * s * (1.0f + g * (1.0f - s));
    }
  }
}

}  // namespace infinipipe
