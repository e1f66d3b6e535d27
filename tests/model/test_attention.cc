// Blockwise attention against a naive double-precision attention with a full score matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "grad_check.h"
#include "model/attention.h"

namespace infinipipe {

using testing::expect_grad_matches;
using testing::random_floats;
using testing::to_double;

namespace {

// Naive causal GQA attention: q (T,NH,HS) at positions P..P+T-1, k/v (P+T,KVH,HS).
void naive_attention(std::vector<double>& out, const std::vector<double>& q,
                     const std::vector<double>& k, const std::vector<double>& v, int64_t T,
                     int64_t P, int64_t NH, int64_t KVH, int64_t HS) {
  const double scale = 1.0 / std::sqrt(double(HS));
  out.assign(static_cast<size_t>(T * NH * HS), 0.0);
  std::vector<double> s(static_cast<size_t>(P + T));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t g = h / (NH / KVH), nk = P + t + 1;
      double mx = -1e300;
      for (int64_t j = 0; j < nk; ++j) {
        double acc = 0;
        for (int64_t c = 0; c < HS; ++c)
          acc += q[(t * NH + h) * HS + c] * k[(j * KVH + g) * HS + c];
        s[j] = acc * scale;
        mx = std::max(mx, s[j]);
      }
      double z = 0;
      for (int64_t j = 0; j < nk; ++j) z += (s[j] = std::exp(s[j] - mx));
      for (int64_t j = 0; j < nk; ++j)
        for (int64_t c = 0; c < HS; ++c)
          out[(t * NH + h) * HS + c] += s[j] / z * v[(j * KVH + g) * HS + c];
    }
}

struct Case {
  std::vector<int64_t> segments;  // prefix segment lengths, then the slice's own length (last)
  int64_t NH, KVH, HS;
};

void check_case(const Case& cs, uint32_t seed) {
  const int64_t NH = cs.NH, KVH = cs.KVH, HS = cs.HS;
  int64_t keys = 0;
  for (int64_t n : cs.segments) keys += n;
  const int64_t T = cs.segments.back(), P = keys - T;
  auto q = random_floats(T * NH * HS, seed, 1.5f);
  auto k = random_floats(keys * KVH * HS, seed + 1, 1.5f);
  auto v = random_floats(keys * KVH * HS, seed + 2);
  auto dout = random_floats(T * NH * HS, seed + 3);
  // Grads of the prefix K/V start non-zero: the kernel must add to them.
  auto dk = random_floats(keys * KVH * HS, seed + 4), dv = random_floats(keys * KVH * HS, seed + 5);
  const auto dk0 = dk, dv0 = dv;
  std::vector<AttnSegment> segs;
  int64_t row = 0;
  for (int64_t n : cs.segments) {
    const int64_t o = row * KVH * HS;
    segs.push_back({k.data() + o, v.data() + o, dk.data() + o, dv.data() + o, n, KVH * HS});
    row += n;
  }
  AttnDims d{T, NH, KVH, HS};
  std::vector<float> ws(static_cast<size_t>(attention_workspace_floats(d)));
  std::vector<float> out(T * NH * HS), lse(T * NH), dq(T * NH * HS, 7.0f);
  attention_forward(out.data(), NH * HS, lse.data(), q.data(), NH * HS, segs, d, ws.data());
  attention_backward(dq.data(), NH * HS, segs, dout.data(), NH * HS, q.data(), NH * HS, out.data(),
                     NH * HS, lse.data(), d, ws.data());

  auto qd = to_double(q), kd = to_double(k), vd = to_double(v);
  std::vector<double> ref;
  naive_attention(ref, qd, kd, vd, T, P, NH, KVH, HS);
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(ref[i] - out[i]));
  EXPECT_LT(worst, 2e-5);
  auto loss = [&] {
    naive_attention(ref, qd, kd, vd, T, P, NH, KVH, HS);
    double s = 0;
    for (size_t i = 0; i < ref.size(); ++i) s += ref[i] * dout[i];
    return s;
  };
  for (size_t i = 0; i < dk.size(); ++i) {
    dk[i] -= dk0[i];
    dv[i] -= dv0[i];
  }
  expect_grad_matches("dq", dq, qd, loss, 2e-4, 40);
  expect_grad_matches("dk", dk, kd, loss, 2e-4, 40);
  expect_grad_matches("dv", dv, vd, loss, 2e-4, 40);
}

}  // namespace

TEST(Attention, SingleBlockNoPrefix) {
  check_case({{9}, 2, 2, 4}, 1);
}

TEST(Attention, GqaWithPrefixOverManyBlocks) {
  // Segments of unequal lengths that do not align with the 128-row tiles.
  check_case({{60, 90, 140}, 4, 2, 8}, 2);
}

TEST(Attention, MultiQueryShortSliceAfterLongPrefix) {
  check_case({{300, 5}, 4, 1, 8}, 3);
}

TEST(Attention, LseIsTheLogSumExp) {
  const int64_t T = 3, NH = 1, HS = 4;
  auto q = random_floats(T * HS, 4), k = random_floats(T * HS, 5), v = random_floats(T * HS, 6);
  AttnSegment seg{k.data(), v.data(), nullptr, nullptr, T, HS};
  AttnDims d{T, NH, 1, HS};
  std::vector<float> ws(static_cast<size_t>(attention_workspace_floats(d))), out(T * HS), lse(T);
  attention_forward(out.data(), HS, lse.data(), q.data(), HS, {&seg, 1}, d, ws.data());
  for (int64_t t = 0; t < T; ++t) {
    double z = 0;
    for (int64_t j = 0; j <= t; ++j) {
      double s = 0;
      for (int64_t c = 0; c < HS; ++c) s += double(q[t * HS + c]) * k[j * HS + c];
      z += std::exp(s / 2.0);
    }
    EXPECT_NEAR(lse[t], std::log(z), 1e-5);
  }
  // The first query sees only the first key: out = v[0].
  for (int64_t c = 0; c < HS; ++c) EXPECT_NEAR(out[c], v[c], 1e-6);
}

}  // namespace infinipipe
