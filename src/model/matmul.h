// Matrix multiplications through oneDNN (fp32). Row-major throughout.
#pragma once

#include <cstdint>

namespace infinipipe {

// C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C. op(X) = X^T when trans_x.
// Inside an OpenMP parallel region it runs on the calling thread only.
void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc);

// Linear layer without bias, HF weight layout [OC, IC].
// out (N,OC) = inp (N,IC) · weight (OC,IC)^T
void matmul_forward(float* out, const float* inp, const float* weight, int64_t N, int64_t IC,
                    int64_t OC);
// dinp (N,IC) = dout (N,OC) · weight (OC,IC)   (+= when accumulate_dinp; skipped if null)
// dweight (OC,IC) += dout (N,OC)^T · inp (N,IC)
void matmul_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t IC, int64_t OC,
                     bool accumulate_dinp = false);

}  // namespace infinipipe
