#include "cost/fit.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"

namespace infinipipe::cost {
namespace {

constexpr int kMaxUnknowns = 4;
using Row = std::array<double, kMaxUnknowns>;

// Solves the weighted normal equations for the columns in `active` (others fixed at 0) by
// Gaussian elimination with partial pivoting. Returns false when the system is singular.
bool solve_normal(const std::vector<Row>& x, const std::vector<double>& y,
                  const std::vector<double>& w, const std::array<bool, kMaxUnknowns>& active,
                  Row& out) {
  std::vector<int> cols;
  for (int j = 0; j < kMaxUnknowns; ++j)
    if (active[j]) cols.push_back(j);
  const int n = static_cast<int>(cols.size());
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));
  // Scale columns to unit size so tokens² and constants are comparable.
  Row scale{};
  for (int c : cols) {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s = std::max(s, std::abs(x[i][c]));
    scale[c] = s > 0 ? s : 1;
  }
  for (size_t i = 0; i < x.size(); ++i)
    for (int r = 0; r < n; ++r) {
      const double xr = x[i][cols[r]] / scale[cols[r]];
      for (int c = 0; c < n; ++c) a[r][c] += w[i] * xr * x[i][cols[c]] / scale[cols[c]];
      a[r][n] += w[i] * xr * y[i];
    }
  double diag = 0;
  for (int r = 0; r < n; ++r) diag = std::max(diag, std::abs(a[r][r]));
  for (int p = 0; p < n; ++p) {
    int best = p;
    for (int r = p + 1; r < n; ++r)
      if (std::abs(a[r][p]) > std::abs(a[best][p])) best = r;
    std::swap(a[p], a[best]);
    if (!(std::abs(a[p][p]) > 1e-10 * diag)) return false;
    for (int r = 0; r < n; ++r) {
      if (r == p) continue;
      const double f = a[r][p] / a[p][p];
      for (int c = p; c <= n; ++c) a[r][c] -= f * a[p][c];
    }
  }
  out = Row{};
  for (int r = 0; r < n; ++r) out[cols[r]] = a[r][n] / a[r][r] / scale[cols[r]];
  return true;
}

// Non-negative least squares by dropping the most negative unknown until all are >= 0.
Row fit_nonnegative(const std::vector<Row>& x, const std::vector<double>& y,
                    const std::vector<double>& w, std::array<bool, kMaxUnknowns> active) {
  Row sol{};
  for (;;) {
    if (!solve_normal(x, y, w, active, sol))
      fail(
          "cost fit: the samples cannot tell the coefficients apart; vary the slice lengths, "
          "the contexts and the layer counts");
    int worst = -1;
    for (int j = 0; j < kMaxUnknowns; ++j)
      if (active[j] && sol[j] < 0 && (worst < 0 || sol[j] < sol[worst])) worst = j;
    if (worst < 0) return sol;
    active[worst] = false;
  }
}

double pairs2(const std::vector<SliceShape>& chunk) {
  double p = 0;
  for (const SliceShape& s : chunk) {
    const double c = static_cast<double>(s.context), l = static_cast<double>(s.len);
    p += (c + l) * (c + l) - c * c;
  }
  return p;
}

}  // namespace

double predict_layer_time(const LayerTimeFit& f, const TimingSample& s) {
  const double t = static_cast<double>(chunk_tokens(s.chunk));
  return f.beta1 + s.num_layers * (f.alpha1 * pairs2(s.chunk) + f.alpha2 * t + f.gamma);
}

LayerTimeFit fit_layer_time(std::span<const TimingSample> samples) {
  if (samples.size() < 4) fail("cost fit: need at least 4 timing samples, got {}", samples.size());
  std::vector<Row> x;
  std::vector<double> y, w;
  bool layers_vary = false;
  for (const TimingSample& s : samples) {
    if (!(s.seconds > 0) || !std::isfinite(s.seconds))
      fail("cost fit: a sample's time must be positive, got {}", s.seconds);
    if (s.num_layers < 1 || s.chunk.empty())
      fail("cost fit: a sample needs a non-empty chunk and at least one layer");
    layers_vary |= s.num_layers != samples[0].num_layers;
    const double l = static_cast<double>(s.num_layers);
    x.push_back({1.0, l * pairs2(s.chunk), l * static_cast<double>(chunk_tokens(s.chunk)), l});
    y.push_back(s.seconds);
    w.push_back(1.0 / (s.seconds * s.seconds));
  }
  const Row sol = fit_nonnegative(x, y, w, {layers_vary, true, true, true});
  LayerTimeFit f;
  f.beta1 = sol[0];
  f.alpha1 = sol[1];
  f.alpha2 = sol[2];
  f.gamma = sol[3];
  f.half_efficiency_tokens = f.alpha2 > 0 ? f.gamma / f.alpha2 : 0.0;
  f.num_samples = static_cast<int64_t>(samples.size());
  double sq = 0;
  for (const TimingSample& s : samples) {
    const double e = (predict_layer_time(f, s) - s.seconds) / s.seconds;
    sq += e * e;
  }
  f.rms_relative_residual = std::sqrt(sq / static_cast<double>(samples.size()));
  return f;
}

double fit_ratio(std::span<const double> base, std::span<const double> measured) {
  if (base.empty() || base.size() != measured.size())
    fail("cost fit: ratio needs equally many (>= 1) base and measured times, got {} and {}",
         base.size(), measured.size());
  // Minimise Σ ((k·b − m)/m)²: k = Σ(b/m) / Σ(b/m)².
  double num = 0, den = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    if (!(measured[i] > 0) || !(base[i] > 0))
      fail("cost fit: ratio needs positive times, got {} and {}", base[i], measured[i]);
    const double r = base[i] / measured[i];
    num += r;
    den += r * r;
  }
  return num / den;
}

LinkFit fit_link(std::span<const int64_t> bytes, std::span<const double> seconds) {
  if (bytes.size() < 2 || bytes.size() != seconds.size())
    fail("cost fit: a link fit needs at least 2 (bytes, seconds) pairs, got {} and {}",
         bytes.size(), seconds.size());
  std::vector<Row> x;
  std::vector<double> y, w;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!(seconds[i] > 0) || bytes[i] < 0)
      fail("cost fit: link sample {} has bytes {} and seconds {}", i, bytes[i], seconds[i]);
    x.push_back({1.0, static_cast<double>(bytes[i]), 0.0, 0.0});
    y.push_back(seconds[i]);
    w.push_back(1.0 / (seconds[i] * seconds[i]));
  }
  const Row sol = fit_nonnegative(x, y, w, {true, true, false, false});
  LinkFit f;
  if (!(sol[1] > 0)) return f;  // no bandwidth to fit: the caller measures again or says so
  f.latency_s = sol[0];
  f.bandwidth = 1.0 / sol[1];
  double sq = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const double e = (bytes[i] / f.bandwidth + f.latency_s - seconds[i]) / seconds[i];
    sq += e * e;
  }
  f.rms_relative_residual = std::sqrt(sq / static_cast<double>(bytes.size()));
  return f;
}

void apply_layer_fit(const LayerTimeFit& f, int64_t ulysses_degree, Coefficients& c) {
  c.alpha1 = f.alpha1;
  c.alpha2 = f.alpha2;
  c.beta1 = f.beta1;
  // The model charges α2·T·t_half/t per layer with t = T/u, i.e. α2·u·t_half = γ.
  c.half_efficiency_tokens = f.alpha2 > 0 ? f.gamma / (f.alpha2 * ulysses_degree) : 0.0;
}

}  // namespace infinipipe::cost
