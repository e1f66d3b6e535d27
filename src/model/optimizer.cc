#include "model/optimizer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"

namespace infinipipe {

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;
constexpr int64_t kBlock = 1 << 13;  // elements per parallel work item

void check_sizes(const OptimTensor& t) {
  if (t.value.size() != t.grad.size()) {
    fail("optimizer: parameter {} has {} values but {} gradient elements", t.name, t.value.size(),
         t.grad.size());
  }
}

struct AdamCoeffs {
  float decay, b1, omb1, b2, omb2, step_size, bc2_sqrt, eps;
};

// Elements [0, n) of one block of a tensor.
void adamw_block(float* __restrict p, const float* __restrict g, float* __restrict m,
                 float* __restrict v, int64_t n, const AdamCoeffs c) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) {
    const float gi = g[i];
    const float mi = c.b1 * m[i] + c.omb1 * gi;
    const float vi = c.b2 * v[i] + c.omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / c.bc2_sqrt + c.eps;
    p[i] = p[i] * c.decay - c.step_size * mi / denom;
  }
}

// AdamW exactly as torch.optim.AdamW (single-tensor path): decoupled decay, bias-corrected moments.
void adamw_update(std::span<float> value, std::span<const float> grad, OptimState& s, double lr,
                  double weight_decay, const OptimizerOptions& o) {
  s.step += 1;
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(s.step));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(s.step));
  const AdamCoeffs c{static_cast<float>(1.0 - lr * weight_decay), static_cast<float>(o.beta1),
                     static_cast<float>(1.0 - o.beta1),           static_cast<float>(o.beta2),
                     static_cast<float>(1.0 - o.beta2),           static_cast<float>(lr / bc1),
                     static_cast<float>(std::sqrt(bc2)),          static_cast<float>(o.eps)};
  const int64_t n = static_cast<int64_t>(value.size());
  const int64_t nblocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t b = 0; b < nblocks; b++) {
    const int64_t i = b * kBlock;
    adamw_block(value.data() + i, grad.data() + i, s.exp_avg.data() + i, s.exp_avg_sq.data() + i,
                std::min(kBlock, n - i), c);
  }
}

// Plain SGD, no momentum and no weight decay: p <- p - lr * g (the reference for checks).
void sgd_update(std::span<float> value, std::span<const float> grad, OptimState& s, double lr) {
  s.step += 1;
  const float lrf = static_cast<float>(lr);
  float* __restrict p = value.data();
  const float* __restrict g = grad.data();
  const int64_t n = static_cast<int64_t>(value.size());
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; i++) p[i] -= lrf * g[i];
}

int64_t state_size_bytes(const OptimState& s) {
  return static_cast<int64_t>((s.exp_avg.size() + s.exp_avg_sq.size()) * sizeof(float));
}

}  // namespace

bool optim_has_weight_decay(const OptimTensor& t) {
  return t.shape.size() >= 2;
}

OptimizerOptions OptimizerOptions::from_config(const TrainingConfig& cfg) {
  OptimizerOptions o;
  o.kind = cfg.optimizer;
  o.weight_decay = cfg.weight_decay;
  o.beta1 = cfg.adam_beta1;
  o.beta2 = cfg.adam_beta2;
  o.eps = cfg.adam_eps;
  o.validate();
  return o;
}

void OptimizerOptions::validate() const {
  if (!(weight_decay >= 0.0)) fail_config("--weight-decay is {}, it must be >= 0", weight_decay);
  if (!(beta1 >= 0.0 && beta1 < 1.0))
    fail_config("--adam-beta1 is {}, it must be in [0, 1)", beta1);
  if (!(beta2 >= 0.0 && beta2 < 1.0))
    fail_config("--adam-beta2 is {}, it must be in [0, 1)", beta2);
  if (!(eps > 0.0)) fail_config("--adam-eps is {}, it must be > 0", eps);
}

ParamOptimizer::ParamOptimizer(const OptimizerOptions& opts, AccountFn account)
    : opts_(opts), account_(std::move(account)) {
  opts_.validate();
}

ParamOptimizer::~ParamOptimizer() {
  if (account_ && bytes_ != 0) account_(-bytes_);
}

void ParamOptimizer::account(int64_t delta) {
  bytes_ += delta;
  if (account_ && delta != 0) account_(delta);
}

OptimState& ParamOptimizer::state_for(const OptimTensor& t) {
  auto it = states_.find(t.name);
  if (it == states_.end()) {
    OptimState s;
    if (opts_.kind == Optimizer::adamw) {
      s.exp_avg.assign(t.value.size(), 0.0f);
      s.exp_avg_sq.assign(t.value.size(), 0.0f);
    }
    it = states_.emplace(t.name, std::move(s)).first;
    account(state_size_bytes(it->second));
  }
  if (opts_.kind == Optimizer::adamw && it->second.exp_avg.size() != t.value.size()) {
    fail("optimizer: parameter {} has {} elements but its AdamW state has {}", t.name,
         t.value.size(), it->second.exp_avg.size());
  }
  return it->second;
}

void ParamOptimizer::step(std::span<const OptimTensor> tensors, double lr) {
  if (!std::isfinite(lr) || lr < 0.0) fail("optimizer: learning rate {} is not usable", lr);
  for (const OptimTensor& t : tensors) {
    check_sizes(t);
    OptimState& s = state_for(t);
    if (opts_.kind == Optimizer::adamw) {
      const double wd = optim_has_weight_decay(t) ? opts_.weight_decay : 0.0;
      adamw_update(t.value, t.grad, s, lr, wd, opts_);
    } else {
      sgd_update(t.value, t.grad, s, lr);
    }
  }
}

const OptimState& ParamOptimizer::state(const std::string& name) const {
  auto it = states_.find(name);
  if (it == states_.end()) fail("optimizer: no state for parameter {}", name);
  return it->second;
}

void ParamOptimizer::set_state(const std::string& name, int64_t numel, OptimState state) {
  const size_t want = opts_.kind == Optimizer::adamw ? static_cast<size_t>(numel) : 0;
  if (state.exp_avg.size() != want || state.exp_avg_sq.size() != want) {
    fail("optimizer state for {} has moments of {} and {} elements, expected {} ({})", name,
         state.exp_avg.size(), state.exp_avg_sq.size(), want, optimizer_name(opts_.kind));
  }
  // 2^53 steps is beyond any run; a larger count is damage and would overflow when stepped.
  if (state.step < 0 || state.step > (int64_t{1} << 53))
    fail("optimizer state for {} has step count {}, outside [0, 2^53]; the checkpoint is damaged",
         name, state.step);
  auto it = states_.find(name);
  if (it != states_.end()) {
    account(-state_size_bytes(it->second));
    states_.erase(it);
  }
  account(state_size_bytes(state));
  states_.emplace(name, std::move(state));
}

std::vector<std::string> ParamOptimizer::state_names() const {
  std::vector<std::string> names;
  names.reserve(states_.size());
  for (const auto& [name, s] : states_) names.push_back(name);
  return names;
}

double grad_sum_squares(std::span<const OptimTensor> tensors) {
  // Eight independent lanes let the compiler vectorise while the order stays fixed.
  double total = 0.0;
  for (const OptimTensor& t : tensors) {
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const float* g = t.grad.data();
    const int64_t n = static_cast<int64_t>(t.grad.size());
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int k = 0; k < 8; k++) lane[k] += static_cast<double>(g[i + k]) * g[i + k];
    }
    for (; i < n; i++) lane[i % 8] += static_cast<double>(g[i]) * g[i];
    total +=
        ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  }
  return total;
}

double grad_norm(std::span<const OptimTensor> tensors) {
  return std::sqrt(grad_sum_squares(tensors));
}

double grad_clip_scale(double total_norm, double max_norm) {
  if (!(max_norm > 0.0)) return 1.0;
  const double coeff = max_norm / (total_norm + 1.0e-6);
  return coeff < 1.0 ? coeff : 1.0;
}

void grad_apply_scale(std::span<const OptimTensor> tensors, double scale) {
  if (scale == 1.0) return;
  const float s = static_cast<float>(scale);
  for (const OptimTensor& t : tensors) {
    float* g = t.grad.data();
    const int64_t n = static_cast<int64_t>(t.grad.size());
#pragma omp parallel for simd schedule(static) if (n >= kParallelMin)
    for (int64_t i = 0; i < n; i++) g[i] *= s;
  }
}

double grad_clip_norm(std::span<const OptimTensor> tensors, double max_norm) {
  const double norm = grad_norm(tensors);
  grad_apply_scale(tensors, grad_clip_scale(norm, max_norm));
  return norm;
}

}  // namespace infinipipe
