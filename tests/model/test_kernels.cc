// Finite-difference checks of the layer kernels against double-precision references.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "grad_check.h"
#include "model/classifier.h"
#include "model/fast_math.h"
#include "model/kernels.h"
#include "model/matmul.h"

namespace infinipipe {

using testing::expect_grad_matches;
using testing::random_floats;
using testing::to_double;

TEST(Kernels, FastExpIsAccurateIncludingTails) {
  for (int64_t n : {1, 7, 8, 16, 37}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[i] = -90.0f + 95.0f * float(i) / float(n);
    std::vector<float> y = x;
    const float shift = 3.0f;
    const float sum = exp_shifted(y.data(), n, shift);
    double ref_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double ref = std::exp(double(x[i] - shift));  // the argument is rounded to fp32
      ref_sum += ref;
      EXPECT_NEAR(y[i], ref, 1e-6 * ref + 1e-37) << x[i];
      EXPECT_NEAR(fast_expf(x[i]), std::exp(double(x[i])), 1e-6 * std::exp(double(x[i])) + 1e-37);
    }
    EXPECT_NEAR(sum, ref_sum, 1e-6 * ref_sum + 1e-37);
    std::vector<float> e(static_cast<size_t>(n));
    exp_neg(e.data(), x.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      if (x[i] > -80.0f) {
        EXPECT_NEAR(e[i], std::exp(-double(x[i])), 1e-6 * std::exp(-double(x[i])));
      }
    }
  }
}

TEST(Kernels, MatmulForwardBackward) {
  const int64_t N = 7, IC = 5, OC = 6;
  auto x = random_floats(N * IC, 1), w = random_floats(OC * IC, 2), r = random_floats(N * OC, 3);
  std::vector<float> out(N * OC), dx(N * IC), dw(OC * IC, 0.5f);
  matmul_forward(out.data(), x.data(), w.data(), N, IC, OC);
  matmul_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), N, IC, OC);
  for (float& g : dw) g -= 0.5f;  // weight grads accumulate
  auto xd = to_double(x), wd = to_double(w);
  auto loss = [&] {
    double s = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < OC; ++o) {
        double acc = 0;
        for (int64_t i = 0; i < IC; ++i) acc += xd[n * IC + i] * wd[o * IC + i];
        s += acc * r[n * OC + o];
      }
    return s;
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < IC; ++i) acc += xd[n * IC + i] * wd[o * IC + i];
      EXPECT_NEAR(out[n * OC + o], acc, 1e-5);
    }
  expect_grad_matches("dx", dx, xd, loss);
  expect_grad_matches("dw", dw, wd, loss);
}

TEST(Kernels, RmsNorm) {
  const int64_t N = 5, C = 12;
  const float eps = 1e-5f;
  auto x = random_floats(N * C, 4), w = random_floats(C, 5), r = random_floats(N * C, 6);
  std::vector<float> out(N * C), rstd(N), dx(N * C, 0.25f), dw(C, 0.0f);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, eps);
  rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), N, C);
  for (float& g : dx) g -= 0.25f;  // dinp accumulates
  auto xd = to_double(x), wd = to_double(w);
  auto fwd = [&](std::vector<double>& o) {
    for (int64_t n = 0; n < N; ++n) {
      double ss = 0;
      for (int64_t c = 0; c < C; ++c) ss += xd[n * C + c] * xd[n * C + c];
      double rs = 1.0 / std::sqrt(ss / C + eps);
      for (int64_t c = 0; c < C; ++c) o[n * C + c] = xd[n * C + c] * rs * wd[c];
    }
  };
  std::vector<double> o(N * C);
  fwd(o);
  for (int64_t i = 0; i < N * C; ++i) EXPECT_NEAR(out[i], o[i], 1e-5);
  auto loss = [&] {
    fwd(o);
    double s = 0;
    for (int64_t i = 0; i < N * C; ++i) s += o[i] * r[i];
    return s;
  };
  expect_grad_matches("dx", dx, xd, loss);
  expect_grad_matches("dw", dw, wd, loss);
}

TEST(Kernels, RopeMatchesRotateHalfWithOffsets) {
  const int64_t N = 6, H = 3, HS = 8;
  const double base = 10000.0;
  std::vector<int64_t> pos = {0, 1, 2, 517, 518, 4095};  // slices at offsets 0 and 517, ...
  auto x = random_floats(N * H * HS, 7), r = random_floats(N * H * HS, 8);
  std::vector<float> inv(HS / 2);
  rope_inv_freq(inv.data(), HS, base);
  std::vector<float> y = x;
  rope_forward(y.data(), pos.data(), inv.data(), N, H, HS);
  std::vector<float> dx = r;
  rope_backward(dx.data(), pos.data(), inv.data(), N, H, HS);
  auto xd = to_double(x);
  std::vector<double> o(x.size());
  auto fwd = [&] {  // q·cos + rotate_half(q)·sin, rotate_half(q) = cat(−q2, q1)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < HS; ++i) {
          int64_t j = i % (HS / 2);
          double ang = double(pos[n]) * double(inv[j]);
          const double* q = &xd[(n * H + h) * HS];
          double rot = i < HS / 2 ? -q[i + HS / 2] : q[i - HS / 2];
          o[(n * H + h) * HS + i] = q[i] * std::cos(ang) + rot * std::sin(ang);
        }
  };
  fwd();
  for (size_t i = 0; i < o.size(); ++i) EXPECT_NEAR(y[i], o[i], 2e-5);
  // HF's inv_freq = 1 / base^(2i/HS)
  for (int64_t i = 0; i < HS / 2; ++i) EXPECT_NEAR(inv[i], std::pow(base, -2.0 * i / HS), 1e-6);
  auto loss = [&] {
    fwd();
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += o[i] * r[i];
    return s;
  };
  expect_grad_matches("dx", dx, xd, loss);
}

TEST(Kernels, SwiGlu) {
  const int64_t N = 4, F = 9;
  auto g = random_floats(N * F, 9, 2.0f), u = random_floats(N * F, 10),
       r = random_floats(N * F, 11);
  std::vector<float> h(N * F), dg(N * F), du(N * F);
  swiglu_forward(h.data(), g.data(), u.data(), N, F);
  swiglu_backward(dg.data(), du.data(), r.data(), g.data(), u.data(), N, F);
  auto gd = to_double(g), ud = to_double(u);
  auto loss = [&] {
    double s = 0;
    for (int64_t i = 0; i < N * F; ++i) s += gd[i] / (1 + std::exp(-gd[i])) * ud[i] * r[i];
    return s;
  };
  for (int64_t i = 0; i < N * F; ++i) {
    EXPECT_NEAR(h[i], g[i] / (1 + std::exp(-double(g[i]))) * u[i], 1e-5);
  }
  expect_grad_matches("dgate", dg, gd, loss);
  expect_grad_matches("dup", du, ud, loss);
  // In place over dh gives the same result.
  std::vector<float> dh = r, dg2(N * F);
  swiglu_backward(dg2.data(), dh.data(), dh.data(), g.data(), u.data(), N, F);
  EXPECT_EQ(dh, du);
  EXPECT_EQ(dg2, dg);
}

TEST(Kernels, EmbeddingWithRepeatedTokens) {
  const int64_t N = 6, C = 5, V = 4;
  std::vector<int32_t> tok = {1, 3, 1, 0, 1, 3};
  auto wte = random_floats(V * C, 12), r = random_floats(N * C, 13);
  std::vector<float> out(N * C), dwte(V * C, 0.0f);
  embedding_forward(out.data(), tok.data(), wte.data(), N, C, V);
  embedding_backward(dwte.data(), r.data(), tok.data(), N, C);
  auto wd = to_double(wte);
  auto loss = [&] {
    double s = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c) s += wd[tok[n] * C + c] * r[n * C + c];
    return s;
  };
  for (int64_t n = 0; n < N; ++n) EXPECT_EQ(out[n * C + 2], wte[tok[n] * C + 2]);
  expect_grad_matches("dwte", dwte, wd, loss);
  std::vector<int32_t> bad = {4};
  EXPECT_THROW(embedding_forward(out.data(), bad.data(), wte.data(), 1, C, V), Error);
}

TEST(Kernels, FusedClassifierOverSeveralBlocks) {
  // More tokens than one block, some without a label (−1).
  const int64_t N = kClassifierBlock + 37, C = 6, V = 11;
  auto x = random_floats(N * C, 14), w = random_floats(V * C, 15);
  std::vector<int32_t> tgt(N);
  for (int64_t n = 0; n < N; ++n) tgt[n] = n % 13 == 5 ? -1 : static_cast<int32_t>((n * 7) % V);
  const float scale = 0.01f;
  std::vector<float> dx(N * C), dw(V * C, 0.0f), ws(kClassifierBlock * V);
  double loss = classifier_forward_backward(dx.data(), dw.data(), x.data(), w.data(), tgt.data(), N,
                                            C, V, scale, ws.data());
  auto xd = to_double(x), wd = to_double(w);
  auto ref = [&] {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) {
      if (tgt[n] < 0) continue;
      std::vector<double> lg(V);
      double mx = -1e300;
      for (int64_t v = 0; v < V; ++v) {
        lg[v] = 0;
        for (int64_t c = 0; c < C; ++c) lg[v] += xd[n * C + c] * wd[v * C + c];
        mx = std::max(mx, lg[v]);
      }
      double z = 0;
      for (double l : lg) z += std::exp(l - mx);
      s += std::log(z) + mx - lg[tgt[n]];
    }
    return s;
  };
  EXPECT_NEAR(loss, ref(), 1e-4 * std::abs(ref()));
  auto scaled = [&] { return scale * ref(); };
  expect_grad_matches("dx", dx, xd, scaled, 2e-4, 200);
  expect_grad_matches("dW", dw, wd, scaled);
  std::vector<int32_t> bad(N, static_cast<int32_t>(V));
  EXPECT_THROW(classifier_forward_backward(dx.data(), dw.data(), x.data(), w.data(), bad.data(), N,
                                           C, V, scale, ws.data()),
               Error);
}

}  // namespace infinipipe
