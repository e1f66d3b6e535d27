#include "model/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"
#include "model/fast_math.h"
#include "model/matmul.h"
#include "model/parallel.h"

namespace infinipipe {

namespace {

// Tiles measured best on Zen 4 at head size 64 (benchmark: bench/bench_model.cc).
constexpr int64_t kBlockQ = 64;   // query rows per tile
constexpr int64_t kBlockK = 256;  // key rows per tile

int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int thread_id() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

int64_t per_thread_floats(const AttnDims& d) {
  return 2 * kBlockQ * kBlockK + kBlockQ * d.HS + 2 * kBlockQ;
}

// One key block: rows [r0, r0 + len) of a segment, at positions pos0.. of the sequence.
struct KeyBlock {
  const AttnSegment* seg;
  int64_t r0;
  int64_t len;
  int64_t pos0;
};

std::vector<KeyBlock> key_blocks(std::span<const AttnSegment> kv, const AttnDims& d) {
  std::vector<KeyBlock> blocks;
  int64_t pos = 0;
  for (const AttnSegment& s : kv) {
    for (int64_t r = 0; r < s.len; r += kBlockK) {
      blocks.push_back({&s, r, std::min(kBlockK, s.len - r), pos + r});
    }
    pos += s.len;
  }
  if (pos < d.T) {
    fail("attention: {} keys for {} queries; the slice's own K/V must be the last segment", pos,
         d.T);
  }
  return blocks;
}

void check_dims(const AttnDims& d) {
  if (d.NH <= 0 || d.KVH <= 0 || d.NH % d.KVH != 0 || d.HS <= 0) {
    fail("attention: {} query heads do not divide into {} key/value heads", d.NH, d.KVH);
  }
}

}  // namespace

int64_t attention_workspace_floats(const AttnDims& d) {
  return per_thread_floats(d) * max_threads() + d.T * d.NH;
}

void attention_forward(float* out, int64_t ldo, float* lse, const float* q, int64_t ldq,
                       std::span<const AttnSegment> kv, const AttnDims& d, float* workspace) {
  check_dims(d);
  if (d.T == 0) return;
  const std::vector<KeyBlock> blocks = key_blocks(kv, d);
  int64_t total_keys = 0;
  for (const AttnSegment& s : kv) total_keys += s.len;
  const int64_t P = total_keys - d.T;  // position of the first query
  const bool parallel = d.T * total_keys * d.NH * d.HS >= 32 * kOmpMinWork;
  const int64_t group = d.NH / d.KVH;
  const int64_t HS = d.HS;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const int64_t nqb = (d.T + kBlockQ - 1) / kBlockQ;
  const float kNegInf = -std::numeric_limits<float>::infinity();

#pragma omp parallel for schedule(dynamic, 1) collapse(2) if (parallel)
  for (int64_t h = 0; h < d.NH; ++h) {
    for (int64_t qb = 0; qb < nqb; ++qb) {
      float* ws = workspace + per_thread_floats(d) * thread_id();
      float* S = ws;                         // (bq, BK) scores, then probabilities
      float* O = S + 2 * kBlockQ * kBlockK;  // (bq, HS) unnormalised output
      float* m = O + kBlockQ * HS;           // (bq) running max
      float* l = m + kBlockQ;                // (bq) running sum
      const int64_t g = h / group;
      const int64_t i0 = qb * kBlockQ, bq = std::min(kBlockQ, d.T - i0);
      const int64_t qpos0 = P + i0, qpos_last = qpos0 + bq - 1;
      const float* Qi = q + i0 * ldq + h * HS;
      std::fill(O, O + bq * HS, 0.0f);
      std::fill(m, m + bq, kNegInf);
      std::fill(l, l + bq, 0.0f);
      for (const KeyBlock& kb : blocks) {
        if (kb.pos0 > qpos_last) break;  // this and later blocks are in the future of every query
        const int64_t bk = kb.len, ld = kb.seg->ld;
        const float* Kj = kb.seg->k + kb.r0 * ld + g * HS;
        const float* Vj = kb.seg->v + kb.r0 * ld + g * HS;
        // S (bq,bk) = scale · Qi (bq,HS) · Kj (bk,HS)ᵀ
        gemm_f32(false, true, bq, bk, HS, scale, Qi, ldq, Kj, ld, 0.0f, S, kBlockK);
        for (int64_t r = 0; r < bq; ++r) {
          float* s = S + r * kBlockK;
          // Keys at positions ≤ the query's are visible: the first nv columns.
          const int64_t nv = std::clamp<int64_t>(qpos0 + r - kb.pos0 + 1, 0, bk);
          float mx = m[r];
#pragma omp simd reduction(max : mx)
          for (int64_t c = 0; c < nv; ++c) mx = std::max(mx, s[c]);
          if (nv == 0 || mx == kNegInf) {
            std::fill(s, s + bk, 0.0f);
            continue;
          }
          const float alpha = fast_expf(m[r] - mx);  // m = −inf on the first block: alpha = 0
          const float sum = exp_shifted(s, nv, mx);
          std::fill(s + nv, s + bk, 0.0f);
          l[r] = l[r] * alpha + sum;
          m[r] = mx;
          float* o = O + r * HS;
          for (int64_t c = 0; c < HS; ++c) o[c] *= alpha;
        }
        // O (bq,HS) += P (bq,bk) · Vj (bk,HS)
        gemm_f32(false, false, bq, HS, bk, 1.0f, S, kBlockK, Vj, ld, 1.0f, O, HS);
      }
      for (int64_t r = 0; r < bq; ++r) {
        const float inv = 1.0f / l[r];
        float* dst = out + (i0 + r) * ldo + h * HS;
        for (int64_t c = 0; c < HS; ++c) dst[c] = O[r * HS + c] * inv;
        lse[(i0 + r) * d.NH + h] = m[r] + std::log(l[r]);
      }
    }
  }
}

void attention_backward(float* dq, int64_t lddq, std::span<const AttnSegment> kv, const float* dout,
                        int64_t lddo, const float* q, int64_t ldq, const float* out, int64_t ldo,
                        const float* lse, const AttnDims& d, float* workspace) {
  check_dims(d);
  if (d.T == 0) return;
  const std::vector<KeyBlock> blocks = key_blocks(kv, d);
  int64_t total_keys = 0;
  for (const AttnSegment& s : kv) total_keys += s.len;
  const int64_t P = total_keys - d.T;
  const bool parallel = d.T * total_keys * d.NH * d.HS >= 32 * kOmpMinWork;
  const int64_t group = d.NH / d.KVH;
  const int64_t HS = d.HS, NH = d.NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  float* D = workspace + per_thread_floats(d) * max_threads();  // (T,NH)

  // D (T,NH) = Σ_c dout·out: the softmax backward's row term; dq starts at zero.
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t t = 0; t < d.T; ++t) {
    for (int64_t h = 0; h < NH; ++h) {
      const float* a = dout + t * lddo + h * HS;
      const float* b = out + t * ldo + h * HS;
      float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
      for (int64_t c = 0; c < HS; ++c) acc += a[c] * b[c];
      D[t * NH + h] = acc;
      std::fill(dq + t * lddq + h * HS, dq + t * lddq + (h + 1) * HS, 0.0f);
    }
  }

  // One task per key/value head: it alone writes that head's dk/dv and its query heads' dq.
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t g = 0; g < d.KVH; ++g) {
    float* ws = workspace + per_thread_floats(d) * thread_id();
    float* Pm = ws;                      // (bq,BK) probabilities
    float* dS = ws + kBlockQ * kBlockK;  // (bq,BK) dP, then dS
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      for (const KeyBlock& kb : blocks) {
        const int64_t bk = kb.len, ld = kb.seg->ld;
        const float* Kj = kb.seg->k + kb.r0 * ld + g * HS;
        const float* Vj = kb.seg->v + kb.r0 * ld + g * HS;
        float* dKj = kb.seg->dk + kb.r0 * ld + g * HS;
        float* dVj = kb.seg->dv + kb.r0 * ld + g * HS;
        // First query that sees this block has position kb.pos0.
        const int64_t first = std::max<int64_t>(0, kb.pos0 - P) / kBlockQ * kBlockQ;
        for (int64_t i0 = first; i0 < d.T; i0 += kBlockQ) {
          const int64_t bq = std::min(kBlockQ, d.T - i0), qpos0 = P + i0;
          const float* Qi = q + i0 * ldq + h * HS;
          const float* dOi = dout + i0 * lddo + h * HS;
          float* dQi = dq + i0 * lddq + h * HS;
          // Pm (bq,bk) = exp(scale · Qi Kjᵀ − lse), zero where the key is in the future
          gemm_f32(false, true, bq, bk, HS, scale, Qi, ldq, Kj, ld, 0.0f, Pm, kBlockK);
          // dP (bq,bk) = dOi (bq,HS) · Vj (bk,HS)ᵀ
          gemm_f32(false, true, bq, bk, HS, 1.0f, dOi, lddo, Vj, ld, 0.0f, dS, kBlockK);
          for (int64_t r = 0; r < bq; ++r) {
            float* p = Pm + r * kBlockK;
            float* ds = dS + r * kBlockK;
            const int64_t nv = std::clamp<int64_t>(qpos0 + r - kb.pos0 + 1, 0, bk);
            const float lse_r = lse[(i0 + r) * NH + h], D_r = D[(i0 + r) * NH + h];
            exp_shifted(p, nv, lse_r);
#pragma omp simd
            for (int64_t c = 0; c < nv; ++c) ds[c] = p[c] * (ds[c] - D_r);  // dS = P ∘ (dP − D)
            std::fill(p + nv, p + bk, 0.0f);
            std::fill(ds + nv, ds + bk, 0.0f);
          }
          // dVj (bk,HS) += Pmᵀ (bk,bq) · dOi (bq,HS)
          gemm_f32(true, false, bk, HS, bq, 1.0f, Pm, kBlockK, dOi, lddo, 1.0f, dVj, ld);
          // dQi (bq,HS) += scale · dS (bq,bk) · Kj (bk,HS)
          gemm_f32(false, false, bq, HS, bk, scale, dS, kBlockK, Kj, ld, 1.0f, dQi, lddq);
          // dKj (bk,HS) += scale · dSᵀ (bk,bq) · Qi (bq,HS)
          gemm_f32(true, false, bk, HS, bq, scale, dS, kBlockK, Qi, ldq, 1.0f, dKj, ld);
        }
      }
    }
  }
}

}  // namespace infinipipe
