#include "model/matmul.h"

#include <oneapi/dnnl/dnnl.hpp>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/error.h"

namespace infinipipe {

void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // op(A)op(B) is zero: C = beta * C
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    }
    return;
  }
  // oneDNN's sgemm: direct JIT GEMM, no primitive to create, so nothing to cache per shape.
  // Small products run on the calling thread: waking the team costs more than they take.
#ifdef _OPENMP
  const bool small = M * N * K < (int64_t{1} << 20) && !omp_in_parallel();
  const int threads = omp_get_max_threads();
  if (small) omp_set_num_threads(1);
#endif
  dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B,
                                ldb, beta, C, ldc);
#ifdef _OPENMP
  if (small) omp_set_num_threads(threads);
#endif
  if (st != dnnl_success) {
    fail("oneDNN sgemm failed (status {}) for M={} N={} K={} lda={} ldb={} ldc={}",
         static_cast<int>(st), M, N, K, lda, ldb, ldc);
  }
}

void matmul_forward(float* out, const float* inp, const float* weight, int64_t N, int64_t IC,
                    int64_t OC) {
  gemm_f32(false, true, N, OC, IC, 1.0f, inp, IC, weight, IC, 0.0f, out, OC);
}

void matmul_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t IC, int64_t OC, bool accumulate_dinp) {
  if (dinp != nullptr) {
    gemm_f32(false, false, N, IC, OC, 1.0f, dout, OC, weight, IC, accumulate_dinp ? 1.0f : 0.0f,
             dinp, IC);
  }
  if (dweight != nullptr)
    gemm_f32(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dweight, IC);
}

}  // namespace infinipipe
