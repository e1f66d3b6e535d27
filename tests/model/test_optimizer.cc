// AdamW / SGD / clipping against hand-written references of torch.optim.AdamW and Megatron's
// clip_grad_norm (computed in double, compared with an fp32 tolerance).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "model/optimizer.h"

namespace infinipipe {
namespace {

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> value, grad;
  OptimTensor view() { return {name, shape, value, grad}; }
};

Param make_param(const std::string& name, std::vector<int64_t> shape, uint32_t seed) {
  Param p{name, shape, {}, {}};
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < n; i++) p.value.push_back(dist(rng));
  p.grad.assign(n, 0.0f);
  return p;
}

void fill_grad(Param& p, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  for (float& g : p.grad) g = dist(rng);
}

// torch.optim.AdamW's single-tensor update, written out in double.
struct RefAdamW {
  std::vector<double> p, m, v;
  int64_t step = 0;
  void update(const std::vector<float>& g, double lr, double wd, double b1, double b2, double eps) {
    step++;
    const double bc1 = 1.0 - std::pow(b1, step), bc2 = 1.0 - std::pow(b2, step);
    for (size_t i = 0; i < p.size(); i++) {
      p[i] *= 1.0 - lr * wd;
      m[i] = b1 * m[i] + (1.0 - b1) * g[i];
      v[i] = b2 * v[i] + (1.0 - b2) * double(g[i]) * g[i];
      const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + eps;
      p[i] -= (lr / bc1) * m[i] / denom;
    }
  }
};

TEST(Optimizer, AdamWMatchesTorchReferenceOverSteps) {
  OptimizerOptions o;
  o.weight_decay = 0.1;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-8;
  ParamOptimizer opt(o);
  Param w = make_param("model.layers.0.mlp.up_proj.weight", {8, 5}, 1);
  Param n = make_param("model.layers.0.input_layernorm.weight", {5}, 2);
  RefAdamW rw{{w.value.begin(), w.value.end()}, std::vector<double>(40), std::vector<double>(40)};
  RefAdamW rn{{n.value.begin(), n.value.end()}, std::vector<double>(5), std::vector<double>(5)};
  const double lrs[] = {1e-3, 5e-4, 2e-3, 1e-3, 3e-4};
  for (int s = 0; s < 5; s++) {
    fill_grad(w, 100 + s, 0.5f);
    fill_grad(n, 200 + s, 0.01f);
    std::vector<OptimTensor> views = {w.view(), n.view()};
    opt.step(views, lrs[s]);
    rw.update(w.grad, lrs[s], 0.1, 0.9, 0.95, 1e-8);
    rn.update(n.grad, lrs[s], 0.0, 0.9, 0.95, 1e-8);  // 1-D: no weight decay
  }
  for (size_t i = 0; i < w.value.size(); i++) EXPECT_NEAR(w.value[i], rw.p[i], 2e-6) << i;
  for (size_t i = 0; i < n.value.size(); i++) EXPECT_NEAR(n.value[i], rn.p[i], 2e-6) << i;
  const OptimState& st = opt.state(w.name);
  EXPECT_EQ(st.step, 5);
  for (size_t i = 0; i < w.value.size(); i++) {
    EXPECT_NEAR(st.exp_avg[i], rw.m[i], 1e-6);
    EXPECT_NEAR(st.exp_avg_sq[i], rw.v[i], 1e-6);
  }
}

TEST(Optimizer, WeightDecayOnlyOnMatrices) {
  OptimizerOptions o;
  o.weight_decay = 0.5;
  ParamOptimizer opt(o);
  Param w = make_param("lm_head.weight", {3, 4}, 3);
  Param n = make_param("model.norm.weight", {4}, 4);
  const std::vector<float> w0 = w.value, n0 = n.value;
  // Zero gradients: the Adam term is 0 / (0 + eps) = 0, so only decay can move a value.
  std::vector<OptimTensor> views = {w.view(), n.view()};
  opt.step(views, 0.1);
  for (size_t i = 0; i < w0.size(); i++) EXPECT_FLOAT_EQ(w.value[i], w0[i] * (1.0f - 0.05f));
  for (size_t i = 0; i < n0.size(); i++) EXPECT_EQ(n.value[i], n0[i]);
  EXPECT_TRUE(optim_has_weight_decay(w.view()));
  EXPECT_FALSE(optim_has_weight_decay(n.view()));
}

TEST(Optimizer, SgdIsPlainGradientStep) {
  OptimizerOptions o;
  o.kind = Optimizer::sgd;
  o.weight_decay = 0.1;  // ignored by plain SGD
  ParamOptimizer opt(o);
  Param w = make_param("model.embed_tokens.weight", {6, 3}, 5);
  fill_grad(w, 6, 1.0f);
  const std::vector<float> w0 = w.value;
  std::vector<OptimTensor> views = {w.view()};
  opt.step(views, 0.25);
  for (size_t i = 0; i < w0.size(); i++) EXPECT_EQ(w.value[i], w0[i] - 0.25f * w.grad[i]);
  EXPECT_EQ(opt.state_bytes(), 0);
  EXPECT_EQ(opt.state(w.name).step, 1);
}

TEST(Optimizer, AccountingHookSeesEveryByte) {
  int64_t live = 0;
  {
    ParamOptimizer opt(OptimizerOptions{}, [&](int64_t d) { live += d; });
    Param a = make_param("a.weight", {4, 4}, 7);
    Param b = make_param("b.weight", {10}, 8);
    std::vector<OptimTensor> views = {a.view(), b.view()};
    opt.step(views, 1e-3);
    EXPECT_EQ(opt.state_bytes(), 2 * (16 + 10) * 4);
    EXPECT_EQ(live, opt.state_bytes());
    OptimState s = opt.state("b.weight");
    opt.set_state("b.weight", 10, s);  // replacing state keeps the count right
    EXPECT_EQ(live, opt.state_bytes());
  }
  EXPECT_EQ(live, 0);
}

TEST(Optimizer, RestoredStateContinuesBitIdentically) {
  ParamOptimizer a(OptimizerOptions{});
  Param pa = make_param("x.weight", {7, 9}, 9);
  for (int s = 0; s < 3; s++) {
    fill_grad(pa, 300 + s, 1.0f);
    std::vector<OptimTensor> views = {pa.view()};
    a.step(views, 1e-2);
  }
  ParamOptimizer b(OptimizerOptions{});
  Param pb = pa;
  b.set_state(pb.name, 63, a.state(pa.name));
  for (int s = 3; s < 6; s++) {
    fill_grad(pa, 300 + s, 1.0f);
    fill_grad(pb, 300 + s, 1.0f);
    std::vector<OptimTensor> va = {pa.view()}, vb = {pb.view()};
    a.step(va, 1e-2);
    b.step(vb, 1e-2);
  }
  EXPECT_EQ(pa.value, pb.value);
  EXPECT_EQ(a.state(pa.name).exp_avg_sq, b.state(pb.name).exp_avg_sq);
  EXPECT_THROW(b.set_state(pb.name, 64, a.state(pa.name)), Error);  // wrong size refused
}

TEST(Optimizer, MismatchedGradientIsAnError) {
  ParamOptimizer opt(OptimizerOptions{});
  std::vector<float> v(4), g(3);
  std::vector<OptimTensor> views = {{"w", {4}, v, g}};
  EXPECT_THROW(opt.step(views, 1e-3), Error);
  OptimizerOptions bad;
  bad.beta2 = 1.0;
  EXPECT_THROW(ParamOptimizer{bad}, ConfigError);
}

TEST(GradClip, NormAndScaleFollowMegatron) {
  Param a = make_param("a", {2}, 1), b = make_param("b", {1}, 2);
  a.grad = {3.0f, 0.0f};
  b.grad = {4.0f};
  std::vector<OptimTensor> views = {a.view(), b.view()};
  EXPECT_DOUBLE_EQ(grad_sum_squares(views), 25.0);
  EXPECT_DOUBLE_EQ(grad_norm(views), 5.0);
  // Below the threshold nothing changes.
  EXPECT_DOUBLE_EQ(grad_clip_norm(views, 10.0), 5.0);
  EXPECT_EQ(a.grad[0], 3.0f);
  // Above: scaled by max / (norm + 1e-6).
  EXPECT_DOUBLE_EQ(grad_clip_norm(views, 1.0), 5.0);
  EXPECT_FLOAT_EQ(a.grad[0], static_cast<float>(3.0 / (5.0 + 1e-6)));
  EXPECT_FLOAT_EQ(b.grad[0], static_cast<float>(4.0 / (5.0 + 1e-6)));
  EXPECT_NEAR(std::sqrt(grad_sum_squares(views)), 1.0, 1e-6);
  EXPECT_DOUBLE_EQ(grad_clip_scale(5.0, 0.0), 1.0);  // 0 disables clipping
}

TEST(GradClip, SumOfSquaresIsDeterministicAndSplits) {
  Param a = make_param("a", {1001}, 11), b = make_param("b", {37, 13}, 12);
  fill_grad(a, 13, 2.0f);
  fill_grad(b, 14, 0.1f);
  std::vector<OptimTensor> both = {a.view(), b.view()};
  double ref = 0.0;
  for (float g : a.grad) ref += double(g) * g;
  for (float g : b.grad) ref += double(g) * g;
  const double s = grad_sum_squares(both);
  EXPECT_NEAR(s, ref, 1e-12 * ref);
  EXPECT_EQ(s, grad_sum_squares(both));  // same order, same bits
  // What ranks would all-reduce: partial sums add up to the whole.
  std::vector<OptimTensor> ra = {a.view()}, rb = {b.view()};
  EXPECT_NEAR(grad_sum_squares(ra) + grad_sum_squares(rb), s, 1e-12 * s);
}

}  // namespace
}  // namespace infinipipe
