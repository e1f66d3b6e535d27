// Recursive least squares on the cost model's time formula (an extended, Gauss-Newton form: the
// formula is bilinear in the terms, e.g. backward_factor × alpha2, so each sample is linearised
// at the current values). Residuals are relative, like the offline fit's, so short and long
// actions count alike; each term is measured in units of its prior, so the covariance is
// well-scaled whatever the device.
#include "cost/online_fit.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "cost/calibration.h"

namespace infinipipe::cost {
namespace {

using Term = OnlineTerm;

struct TermField {
  Term term;
  const char* name;
  double Coefficients::*ptr;
};
constexpr TermField kTerms[kNumOnlineTerms] = {
    {Term::alpha1, "alpha1", &Coefficients::alpha1},
    {Term::alpha2, "alpha2", &Coefficients::alpha2},
    {Term::beta1, "beta1", &Coefficients::beta1},
    {Term::half_efficiency_tokens, "half_efficiency_tokens", &Coefficients::half_efficiency_tokens},
    {Term::backward_factor, "backward_factor", &Coefficients::backward_factor},
    {Term::recompute_factor, "recompute_factor", &Coefficients::recompute_factor},
    {Term::embedding_per_token, "embedding_per_token", &Coefficients::embedding_per_token},
    {Term::lm_head_per_token, "lm_head_per_token", &Coefficients::lm_head_per_token},
    {Term::lm_head_backward_factor, "lm_head_backward_factor",
     &Coefficients::lm_head_backward_factor},
};

constexpr int idx(Term t) {
  return static_cast<int>(t);
}

// How far (a factor) the regression's weight follows the prediction away from the measurement.
constexpr double kWeightBand = 1.5;
// A term near 0 may still move by max_relative_step of this fraction of its scale per sample.
constexpr double kNearZeroFraction = 0.1;
// A backward is never free, and a calibration file requires backward_factor > 0.
constexpr double kMinBackwardFraction = 0.01;
// A backward costs at least its forward: it runs the forward's matmuls twice, for the inputs'
// and for the weights' gradients. A calibration's factor below this (0.12 from a profile whose
// backwards were timed while other processes ran) is measured in units of this, so the ceiling
// (max_factor_from_prior) and the prior uncertainty are those of a factor of 1, not 0.12's.
constexpr double kLeastBackwardFactor = 1.0;

}  // namespace

const char* online_term_name(OnlineTerm t) {
  return kTerms[idx(t)].name;
}

OnlineFit::OnlineFit(const CostModel& prior, const OnlineFitOptions& options)
    : prior_(prior), options_(options) {
  if (!(options.forgetting > 0 && options.forgetting <= 1))
    fail_config("online cost fit: forgetting factor must be in (0, 1], got {}", options.forgetting);
  if (!(options.max_relative_step > 0 && options.max_relative_step < 1))
    fail_config("online cost fit: max relative step must be in (0, 1), got {}",
                options.max_relative_step);
  if (!(options.prior_relative_sd > 0) || !std::isfinite(options.prior_relative_sd))
    fail_config("online cost fit: prior relative sd must be > 0, got {}",
                options.prior_relative_sd);
  if (!(options.prior_common_sd >= 0) || !std::isfinite(options.prior_common_sd) ||
      !(options.prior_time_term_sd > 0) || !std::isfinite(options.prior_time_term_sd))
    fail_config(
        "online cost fit: prior sd of the common factor ({}) must be >= 0 and of each "
        "time term ({}) > 0",
        options.prior_common_sd, options.prior_time_term_sd);
  if (!(options.max_factor_from_prior > 1) || !std::isfinite(options.max_factor_from_prior))
    fail_config("online cost fit: max factor from the prior must be > 1, got {}",
                options.max_factor_from_prior);
  for (const TermField& f : kTerms) {
    const int i = idx(f.term);
    value_[i] = prior.coefficients().*f.ptr;
    scale_[i] = value_[i] > 0 ? value_[i] : 0.0;
  }
  scale_[idx(Term::backward_factor)] =
      std::max(scale_[idx(Term::backward_factor)], kLeastBackwardFactor);
  cov_ = prior_covariance();
}

std::array<OnlineFit::Vec, kNumOnlineTerms> OnlineFit::prior_covariance() const {
  constexpr Term kCommon[] = {Term::alpha1, Term::alpha2, Term::beta1, Term::embedding_per_token,
                              Term::lm_head_per_token};
  std::array<Vec, kNumOnlineTerms> cov{};
  for (int i = 0; i < kNumOnlineTerms; ++i)
    cov[i][i] = options_.prior_relative_sd * options_.prior_relative_sd;
  const double common = options_.prior_common_sd * options_.prior_common_sd;
  for (Term a : kCommon) {
    cov[idx(a)][idx(a)] = options_.prior_time_term_sd * options_.prior_time_term_sd;
    for (Term b : kCommon) cov[idx(a)][idx(b)] += common;
  }
  return cov;
}

void OnlineFit::check_shape(const ActionSample& s) const {
  if (s.chunk.empty()) fail("online cost fit: a sample needs a non-empty chunk");
  for (const SliceShape& sl : s.chunk)
    if (sl.len <= 0 || sl.context < 0)
      fail("online cost fit: bad slice (context {}, len {}): len must be > 0 and context >= 0",
           sl.context, sl.len);
  if (s.stage.num_layers < 0 || s.recompute_layers < 0 || s.recompute_layers > s.stage.num_layers ||
      (!s.backward && s.recompute_layers != 0))
    fail(
        "online cost fit: recompute layers {} must be within 0..{} (the stage's layers), and 0 "
        "for a forward",
        s.recompute_layers, s.stage.num_layers);
}

// The formulas of CostModel::forward_time / backward_time + recompute_time, written out so each
// term's derivative is at hand. With n = T + u·t_half (T / efficiency, see layer_seconds):
//   layer ℓ = α1·P + α2·n, head = H·n, embedding = e·T, A = one layer's all-to-alls (links, fixed)
//   forward  = β1 + L·ℓ + embedding + head + L·A
//   backward = β1 + κb·(L·ℓ + embedding) + κh·head + L·A + R·(κr·ℓ + A)
double OnlineFit::predict_with_gradient(const ActionSample& s, Vec& g) const {
  g = Vec{};
  const Vec& v = value_;
  double pairs2 = 0;
  for (const SliceShape& sl : s.chunk) {
    const double c = static_cast<double>(sl.context), l = static_cast<double>(sl.len);
    pairs2 += (c + l) * (c + l) - c * c;
  }
  const double T = static_cast<double>(chunk_tokens(s.chunk));
  const double u = static_cast<double>(prior_.ulysses_degree());
  const double L = static_cast<double>(s.stage.num_layers);
  const double R = static_cast<double>(s.recompute_layers);
  const double n = T + u * v[idx(Term::half_efficiency_tokens)];
  const double a1 = v[idx(Term::alpha1)], a2 = v[idx(Term::alpha2)];
  const double layer = a1 * pairs2 + a2 * n;
  const double e = s.stage.has_embedding ? v[idx(Term::embedding_per_token)] * T : 0.0;
  const double H = v[idx(Term::lm_head_per_token)];
  const double head = s.stage.has_lm_head ? H * n : 0.0;
  const double A = prior_.ulysses_alltoall_time(static_cast<int64_t>(T));
  g[idx(Term::beta1)] = 1.0;
  if (!s.backward) {
    g[idx(Term::alpha1)] = L * pairs2;
    g[idx(Term::alpha2)] = L * n;
    g[idx(Term::half_efficiency_tokens)] = L * a2 * u + (s.stage.has_lm_head ? H * u : 0.0);
    if (s.stage.has_embedding) g[idx(Term::embedding_per_token)] = T;
    if (s.stage.has_lm_head) g[idx(Term::lm_head_per_token)] = n;
    return v[idx(Term::beta1)] + L * layer + e + head + L * A;
  }
  const double kb = v[idx(Term::backward_factor)], kr = v[idx(Term::recompute_factor)];
  const double kh = v[idx(Term::lm_head_backward_factor)];
  const double m = kb * L + R * kr;  // layer forwards a backward action pays for
  g[idx(Term::alpha1)] = m * pairs2;
  g[idx(Term::alpha2)] = m * n;
  g[idx(Term::half_efficiency_tokens)] = m * a2 * u + (s.stage.has_lm_head ? kh * H * u : 0.0);
  g[idx(Term::backward_factor)] = L * layer + e;
  g[idx(Term::recompute_factor)] = R * layer;
  if (s.stage.has_embedding) g[idx(Term::embedding_per_token)] = kb * T;
  if (s.stage.has_lm_head) {
    g[idx(Term::lm_head_per_token)] = kh * n;
    g[idx(Term::lm_head_backward_factor)] = head;
  }
  return v[idx(Term::beta1)] + kb * (L * layer + e) + kh * head + L * A + R * (kr * layer + A);
}

double OnlineFit::predict(const ActionSample& s) const {
  check_shape(s);
  Vec g;
  return predict_with_gradient(s, g);
}

void OnlineFit::update(const ActionSample& s) {
  check_shape(s);
  if (!(s.seconds > 0) || !std::isfinite(s.seconds))
    fail("online cost fit: a measured action time must be positive and finite, got {}", s.seconds);
  Vec g;
  const double pred = predict_with_gradient(s, g);
  const double y = s.seconds, lambda = options_.forgetting;
  const double r_measured = (y - pred) / y;  // what residual() reports
  const int kind = s.backward ? 1 : 0;
  residual_sq_[kind] = lambda * residual_sq_[kind] + r_measured * r_measured;
  residual_weight_[kind] = lambda * residual_weight_[kind] + 1.0;
  ++count_[kind];

  // The regression is relative to the prediction: its weight 1 / pred^2 is fixed at the point
  // of linearisation, so the fit settles where an action's prediction is its mean time. Relative
  // to the measurement (weight 1 / y^2) it settled at E[1/y] / E[1/y^2], below the mean by about
  // twice the noise's relative variance (6 % for +-30 % uniform noise), and a step, a sum of
  // actions, came out short by as much. Within 1.5x of the measurement (wider than the +-30 %
  // scatter of ranks sharing cores) the weight is the prediction's; beyond it (a prior far off
  // the machine, a rank several times slower) it stays within 1.5x of the measurement's, so
  // those first samples do not count as more certain than they are and the fit catches up as
  // fast as when weighted by the measurement.
  const double rel = std::clamp(pred, y / kWeightBand, y * kWeightBand);
  const double r = (y - pred) / rel;
  Vec x{};  // the relative regressor, in units of each term's scale
  for (int i = 0; i < kNumOnlineTerms; ++i) {
    if (g[i] == 0) continue;
    covered_[i] = true;
    ++term_count_[i];
    // A term with no prior value gets the scale at which it alone would explain this sample.
    if (scale_[i] == 0) scale_[i] = y / std::abs(g[i]);
    x[i] = g[i] * scale_[i] / rel;
  }
  // A term already at its floor or ceiling and pushed further out takes no part in this update
  // (nor in the covariance's): the others are fitted with it fixed, as it really stays. Letting
  // the recursion count on its move and clamping it afterwards left that part of the residual to
  // the correlated terms, through their covariance.
  std::array<bool, kNumOnlineTerms> out{};
  Vec step{};
  for (int pass = 0; pass <= kNumOnlineTerms; ++pass) {
    Vec xf = x, pf{};
    for (int i = 0; i < kNumOnlineTerms; ++i)
      if (out[i]) xf[i] = 0;
    double df = lambda;
    for (int i = 0; i < kNumOnlineTerms; ++i) {
      for (int j = 0; j < kNumOnlineTerms; ++j) pf[i] += cov_[i][j] * xf[j];
      df += xf[i] * pf[i];
    }
    bool changed = false;
    for (int i = 0; i < kNumOnlineTerms; ++i) {
      // A term no sample has depended on keeps its prior (the common factor's covariance would
      // move it along with the others).
      step[i] = out[i] || !covered_[i] ? 0.0 : pf[i] / df * r * scale_[i];
      if (!out[i] && at_bound(i, step[i])) out[i] = changed = true;
    }
    if (!changed) break;
  }
  // The step is bounded as a whole (scaled until no term moves by more than its step_limit), so
  // it keeps the recursion's direction. Bounding each term on its own moved the unbounded one of
  // a correlated pair fully and its partner partly: on timings as noisy as a shared machine's
  // (±30%) that bias walked β1 to its floor and the efficiency curve's t_half down, doubling the
  // prediction error (tests/cost/test_online_fit_guard.cc).
  double shrink = 1.0;
  for (int i = 0; i < kNumOnlineTerms; ++i)
    if (std::abs(step[i]) > step_limit(i))
      shrink = std::min(shrink, step_limit(i) / std::abs(step[i]));
  // A bounded step uses only that share of what the sample says, so the covariance learns only
  // that share (P - s·P x xᵀ P / d stays positive semi-definite for s in [0, 1]). Shrunk fully,
  // it counted samples the terms had barely moved for, and a prior far off crept towards the
  // machine (tests/cost/test_online_fit_guard.cc, APriorFarOffIsCaughtUpWithinFiveIterations).
  Vec xs = x, px{};
  double denom = lambda;
  for (int i = 0; i < kNumOnlineTerms; ++i)
    if (out[i]) xs[i] = 0;
  for (int i = 0; i < kNumOnlineTerms; ++i) {
    for (int j = 0; j < kNumOnlineTerms; ++j) px[i] += cov_[i][j] * xs[j];
    denom += xs[i] * px[i];
  }
  for (int i = 0; i < kNumOnlineTerms; ++i)
    for (int j = 0; j < kNumOnlineTerms; ++j)
      cov_[i][j] = (cov_[i][j] - px[i] * px[j] / denom * shrink) / lambda;
  // Forgetting inflates the uncertainty of directions no sample excites; cap each term's at its
  // prior's (a congruence by a diagonal matrix, so the covariance stays positive semi-definite).
  const std::array<Vec, kNumOnlineTerms> prior = prior_covariance();
  for (int i = 0; i < kNumOnlineTerms; ++i) {
    if (cov_[i][i] <= prior[i][i]) continue;
    const double f = std::sqrt(prior[i][i] / cov_[i][i]);
    for (int j = 0; j < kNumOnlineTerms; ++j) {
      cov_[i][j] *= f;
      cov_[j][i] *= f;
    }
  }
  for (int i = 0; i < kNumOnlineTerms; ++i)
    value_[i] =
        std::clamp(value_[i] + shrink * step[i], floor_of(i), std::max(floor_of(i), ceiling_of(i)));
}

// No term moves by more than max_relative_step of its value (of a tenth of its scale when near 0)
// per sample, so one outlier (a rank descheduled mid-action) cannot throw the model off.
double OnlineFit::step_limit(int i) const {
  return options_.max_relative_step * std::max(std::abs(value_[i]), kNearZeroFraction * scale_[i]);
}

double OnlineFit::floor_of(int i) const {
  return i == idx(Term::backward_factor) ? kMinBackwardFraction * scale_[i] : 0.0;
}

double OnlineFit::ceiling_of(int i) const {
  return options_.max_factor_from_prior * scale_[i];
}

// Whether term i sits at its floor (ceiling) and `step` would push it further down (up).
bool OnlineFit::at_bound(int i, double step) const {
  return (step < 0 && value_[i] <= floor_of(i)) || (step > 0 && value_[i] >= ceiling_of(i));
}

double OnlineFit::residual(bool backward) const {
  const int k = backward ? 1 : 0;
  return residual_weight_[k] > 0 ? std::sqrt(residual_sq_[k] / residual_weight_[k]) : 0.0;
}

void OnlineFit::widen() {
  cov_ = prior_covariance();
}

OnlineFitState OnlineFit::state() const {
  return {value_, scale_, cov_, covered_, term_count_, count_, residual_sq_, residual_weight_};
}

namespace {

// Whether `cov` is positive semi-definite to within `slack` (Cholesky of cov + slack·I): the
// recursion keeps it so, and its update divides by λ + xᵀ·cov·x, which only that keeps positive.
bool positive_semidefinite(
    const std::array<std::array<double, kNumOnlineTerms>, kNumOnlineTerms>& cov, double slack) {
  std::array<std::array<double, kNumOnlineTerms>, kNumOnlineTerms> l{};
  for (int i = 0; i < kNumOnlineTerms; ++i) {
    for (int j = 0; j <= i; ++j) {
      double sum = cov[i][j] + (i == j ? slack : 0.0);
      for (int k = 0; k < j; ++k) sum -= l[i][k] * l[j][k];
      if (i == j) {
        if (!(sum > 0)) return false;
        l[i][i] = std::sqrt(sum);
      } else {
        l[i][j] = sum / l[j][j];
      }
    }
  }
  return true;
}

// A restored state is one a fit reaches: its terms within what a calibration file may hold
// (online_fit_calibration writes them as one), each variance within the prior's (`prior`: the
// recursion caps them there), the covariance symmetric and positive semi-definite.
template <class Cov>
void state_check(const OnlineFitState& s, const Cov& prior, const std::string& where) {
  const auto sane = [](double v) { return std::isfinite(v) && v >= 0; };
  constexpr double kSlack = 1e-9;  // round-off of the variance cap
  for (int i = 0; i < kNumOnlineTerms; ++i) {
    const char* name = kTerms[i].name;
    if (!sane(s.value[i]) || !sane(s.scale[i]) || !sane(s.cov[i][i]))
      fail("{}: term {} has value {}, scale {}, variance {}; each must be finite and >= 0", where,
           name, s.value[i], s.scale[i], s.cov[i][i]);
    const double most = calibration_coefficient_max(name);
    if (s.value[i] > most || s.scale[i] > most ||
        (s.value[i] == 0 && calibration_coefficient_positive(name)))
      fail(
          "{}: term {} has value {} and scale {}; a fit keeps them within what a calibration "
          "holds ({}at most {:g})",
          where, name, s.value[i], s.scale[i],
          calibration_coefficient_positive(name) ? "value > 0, " : "", most);
    if (s.cov[i][i] > prior[i][i] * (1 + kSlack))
      fail("{}: term {} has variance {}; a fit keeps each at most the prior's, {}", where, name,
           s.cov[i][i], prior[i][i]);
    for (int j = 0; j < kNumOnlineTerms; ++j)
      if (!std::isfinite(s.cov[i][j]) || s.cov[i][j] != s.cov[j][i])
        fail("{}: the covariance of {} and {} is {} and {}; it must be finite and symmetric", where,
             name, kTerms[j].name, s.cov[i][j], s.cov[j][i]);
    const int64_t all = s.count[0] + s.count[1];
    if (s.term_count[i] < 0 || s.term_count[i] > all || s.covered[i] != (s.term_count[i] > 0))
      fail("{}: term {} counts {} samples of {} (covered: {}); not a state a fit reaches", where,
           name, s.term_count[i], all, s.covered[i]);
  }
  for (int k = 0; k < 2; ++k)
    if (s.count[k] < 0 || !sane(s.residual_sq[k]) || !sane(s.residual_weight[k]))
      fail("{}: {} samples {}, residual {} over weight {}; each must be finite and >= 0", where,
           k == 0 ? "forward" : "backward", s.count[k], s.residual_sq[k], s.residual_weight[k]);
  // Generous against the recursion's round-off, which a long run accumulates.
  double most = 0;
  for (int i = 0; i < kNumOnlineTerms; ++i) most = std::max(most, prior[i][i]);
  if (!positive_semidefinite(s.cov, 1e-6 * most))
    fail("{}: the covariance of the terms is not positive semi-definite; not a state a fit reaches",
         where);
}

}  // namespace

void OnlineFit::restore(const OnlineFitState& s, const std::string& where) {
  state_check(s, prior_covariance(), where);
  value_ = s.value;
  scale_ = s.scale;
  cov_ = s.cov;
  covered_ = s.covered;
  term_count_ = s.term_count;
  count_ = s.count;
  residual_sq_ = s.residual_sq;
  residual_weight_ = s.residual_weight;
}

Coefficients OnlineFit::coefficients() const {
  Coefficients c = prior_.coefficients();
  for (const TermField& f : kTerms) c.*f.ptr = value_[idx(f.term)];
  return c;
}

CostModel OnlineFit::cost_model() const {
  return CostModel(prior_.model(), prior_.device(), coefficients(), prior_.ulysses_degree(),
                   prior_.bf16());
}

std::array<double, kNumOnlineTerms> online_terms_get(const Coefficients& c) {
  std::array<double, kNumOnlineTerms> out{};
  for (const TermField& f : kTerms) out[idx(f.term)] = c.*f.ptr;
  return out;
}

void online_terms_set(std::span<const double> terms, Coefficients& c) {
  if (terms.size() != kNumOnlineTerms)
    fail("online cost fit: expected {} time terms, got {}", kNumOnlineTerms, terms.size());
  for (const TermField& f : kTerms) c.*f.ptr = terms[idx(f.term)];
}

std::array<double, kOnlineShareSize> online_fit_share(const OnlineFit& fit) {
  std::array<double, kOnlineShareSize> s{};
  for (const TermField& f : kTerms) {
    const double n = static_cast<double>(fit.term_samples(f.term));
    s[idx(f.term)] = fit.term(f.term) * n;
    s[kNumOnlineTerms + idx(f.term)] = n;
  }
  for (int k = 0; k < 2; ++k) {
    const double n = static_cast<double>(fit.num_samples(k == 1));
    s[2 * kNumOnlineTerms + 2 * k] = fit.residual(k == 1) * fit.residual(k == 1) * n;
    s[2 * kNumOnlineTerms + 2 * k + 1] = n;
  }
  return s;
}

OnlinePooled online_fit_pool(const CostModel& prior,
                             const std::array<double, kOnlineShareSize>& summed) {
  OnlinePooled p;
  p.coeffs = prior.coefficients();
  for (const TermField& f : kTerms) {
    const double n = summed[kNumOnlineTerms + idx(f.term)];
    if (n > 0) p.coeffs.*f.ptr = summed[idx(f.term)] / n;
  }
  const auto rms = [&](int k) {
    const double n = summed[2 * kNumOnlineTerms + 2 * k + 1];
    return n > 0 ? std::sqrt(summed[2 * kNumOnlineTerms + 2 * k] / n) : 0.0;
  };
  p.residual_forward = rms(0);
  p.residual_backward = rms(1);
  return p;
}

Calibration online_calibration(const CostModel& prior, const OnlinePooled& fitted,
                               const std::string& machine, const std::string& date,
                               const std::string& notes) {
  Calibration cal;
  cal.machine = machine;
  cal.date = date;
  cal.notes = notes;
  cal.model = prior.model();
  cal.ulysses_degree = prior.ulysses_degree();
  cal.bf16 = prior.bf16();
  cal.fit_residual_forward = fitted.residual_forward;
  cal.fit_residual_backward = fitted.residual_backward;
  cal.coeffs = fitted.coeffs;
  // The device record carries the fitted overhead, efficiency curve and backward factor, as a
  // profiled file does.
  cal.device = prior.device();
  cal.device.chunk_overhead_s = cal.coeffs.beta1;
  cal.device.half_efficiency_tokens = cal.coeffs.half_efficiency_tokens;
  cal.device.backward_factor = cal.coeffs.backward_factor;
  return cal;
}

Calibration online_fit_calibration(const OnlineFit& fit, const std::string& machine,
                                   const std::string& date, const std::string& notes) {
  return online_calibration(fit.prior(),
                            {fit.coefficients(), fit.residual(false), fit.residual(true)}, machine,
                            date, notes);
}

}  // namespace infinipipe::cost
