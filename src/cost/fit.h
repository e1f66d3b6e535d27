// Least-squares fits of the cost model's time coefficients from measured timings; the profiler
// (`infinipipe profile`) feeds them what it measured and stores the result in a calibration file.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cost/cost_model.h"

namespace infinipipe::cost {

// One measured forward of `num_layers` layers over a chunk (no embedding / LM head).
struct TimingSample {
  std::vector<SliceShape> chunk;
  int64_t num_layers = 1;
  double seconds = 0;
};

// seconds ≈ β1 + L·(α1·Σ((C+s)² − C²) + α2·T + γ), with γ = α2·t_half the per-layer cost of an
// under-filled device. All four are kept >= 0. β1 and γ are told apart only when the samples
// have different layer counts; otherwise β1 = 0 and the constant goes into γ.
struct LayerTimeFit {
  double alpha1 = 0, alpha2 = 0, beta1 = 0, gamma = 0;
  double half_efficiency_tokens = 0;  // γ / α2 (tokens per device when ulysses degree is 1)
  double rms_relative_residual = 0;   // sqrt(mean(((pred − y)/y)²)) over the samples
  int64_t num_samples = 0;
};

// Relative least squares (each sample weighted by 1/y², so short and long chunks count alike).
// Throws Error with fewer samples than unknowns or non-positive times.
LayerTimeFit fit_layer_time(std::span<const TimingSample> samples);
double predict_layer_time(const LayerTimeFit& fit, const TimingSample& sample);

// measured ≈ k · base (e.g. backward vs forward); relative least squares. Throws on empty input.
double fit_ratio(std::span<const double> base, std::span<const double> measured);

// seconds ≈ bytes / bandwidth + latency, from (bytes, seconds) measurements of one link;
// bandwidth 0 when the times do not grow with the message size (noise, not a link).
struct LinkFit {
  double bandwidth = 0;  // bytes/s
  double latency_s = 0;
  double rms_relative_residual = 0;
};
LinkFit fit_link(std::span<const int64_t> bytes, std::span<const double> seconds);

// Puts a fit into coefficients (alpha1, alpha2, beta1, half_efficiency_tokens).
void apply_layer_fit(const LayerTimeFit& fit, int64_t ulysses_degree, Coefficients& coeffs);

}  // namespace infinipipe::cost
