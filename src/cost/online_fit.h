// Online refit of one rank's time coefficients from the action times it measures while training.
// The offline fit (fit.h) sees one kernel at a time on an idle machine; a training rank shares
// caches and cores and does bookkeeping between actions, so its actions run slower than the
// calibration says. This fit follows what the rank really measures: recursive least squares on
// the cost model's own time formula, with a forgetting factor so it tracks a machine whose speed
// drifts, and a guard that keeps every step small and every term sane. docs/cost-model.md.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cost/calibration.h"
#include "cost/cost_model.h"

namespace infinipipe::cost {

// The time terms the fit moves; every other coefficient (links, memory) stays the prior's.
enum class OnlineTerm : int {
  alpha1,
  alpha2,
  beta1,
  half_efficiency_tokens,
  backward_factor,
  recompute_factor,
  embedding_per_token,
  lm_head_per_token,
  lm_head_backward_factor,
};
inline constexpr int kNumOnlineTerms = 9;
const char* online_term_name(OnlineTerm t);

// One action as it ran: a forward, or a backward with its recompute, of a chunk on one stage.
struct ActionSample {
  std::vector<SliceShape> chunk;
  StageShape stage;
  bool backward = false;
  int64_t recompute_layers = 0;  // layers recomputed inside this backward (0 for a forward)
  double seconds = 0;            // measured
};

// Everything an OnlineFit has learned, so a resumed run continues the same recursion (a
// checkpoint's cost-fit file, online_fit_state.h). Arrays in OnlineTerm order; index 0 of the
// per-kind arrays is forwards, 1 backwards.
struct OnlineFitState {
  std::array<double, kNumOnlineTerms> value{}, scale{};
  std::array<std::array<double, kNumOnlineTerms>, kNumOnlineTerms> cov{};
  std::array<bool, kNumOnlineTerms> covered{};
  std::array<int64_t, kNumOnlineTerms> term_count{};
  std::array<int64_t, 2> count{};
  std::array<double, 2> residual_sq{}, residual_weight{};
};

struct OnlineFitOptions {
  // Weight of the past per sample: 0.99 remembers about the last 100 actions, four or five
  // iterations of a demo rank, and follows a 1.5x change of speed within a few hundred. A
  // shorter memory (0.95, with 10% steps) let the action-to-action noise of ranks sharing cores
  // (±30%) walk the terms away: in the demo the iteration error went from +40% to -60% over 50
  // iterations instead of settling.
  double forgetting = 0.99;
  // No term moves by more than this fraction of its value (or of its scale when near 0) per
  // sample, so one outlier (a rank descheduled mid-action) cannot throw the model off.
  double max_relative_step = 0.03;
  // Prior uncertainty of each term on its own, as a multiple of its prior value; also the most
  // the forgetting may let a term's uncertainty grow back to (with the common factor below, for
  // the time-per-unit terms). The factors of the model (κb, κr, the LM head's backward, t_half)
  // are off by up to several times in a calibration (κr 5x with `profile --quick` on a busy
  // machine, the LM head's backward about 0 on this engine against the preset's 2), so they are
  // held loosely; the step bound keeps the early updates small.
  double prior_relative_sd = 3.0;
  // The time-per-unit terms (α1, α2, β1, embedding, LM head) mostly differ from a calibration by
  // one factor, the speed of the machine a training rank sees (caches and memory bandwidth
  // shared, other ranks' time slices: 20-40 % in the demo, up to 70 % on a busy rank), and each
  // on its own by less: their prior uncertainty is `prior_common_sd` of one factor they share
  // plus `prior_time_term_sd` each. The first samples then move them together, instead of
  // spending ±30 % noisy samples on splitting a common gap between nine terms
  // (tests/cost/test_online_fit_guard.cc).
  double prior_common_sd = 3.0;
  double prior_time_term_sd = 1.0;
  // No term grows past this multiple of its prior (terms without one: of the scale their first
  // sample gave). Several terms move the same predictions (β1 against the per-token terms, κr
  // against κb), so within the bounded steps a fit can still wander far along such a direction
  // over hundreds of updates while explaining noise; real ranks run slower than their
  // calibration by up to about 2x, single terms by several times. Terms may fall to their floor:
  // the LM head's backward factor is about 0 on this engine, which computes it in forward.
  double max_factor_from_prior = 4.0;
};

class OnlineFit {
 public:
  // Starts from the prior's coefficients (a preset or a calibration file). Throws ConfigError
  // for options outside (0, 1] / (0, 1) / > 0.
  explicit OnlineFit(const CostModel& prior, const OnlineFitOptions& options = {});

  // One measured action. Throws Error for a non-positive or non-finite time, an empty chunk or
  // a recompute count outside 0..the stage's layers.
  void update(const ActionSample& sample);

  // The prior's coefficients with the fitted time terms.
  Coefficients coefficients() const;
  CostModel cost_model() const;
  // Seconds the current coefficients predict for the sample (what CostModel predicts); its
  // `seconds` is not read. Throws Error for a shape update() refuses.
  double predict(const ActionSample& sample) const;

  double term(OnlineTerm t) const { return value_[static_cast<int>(t)]; }
  // Whether any sample so far depended on the term; uncovered terms keep their prior exactly.
  bool covered(OnlineTerm t) const { return covered_[static_cast<int>(t)]; }
  int64_t num_samples(bool backward) const { return count_[backward ? 1 : 0]; }
  // Samples that depended on the term.
  int64_t term_samples(OnlineTerm t) const { return term_count_[static_cast<int>(t)]; }
  // Relative RMS of the errors the fit made predicting each sample before learning from it,
  // weighted by the forgetting factor (0 before any sample of that kind).
  double residual(bool backward) const;
  const CostModel& prior() const { return prior_; }

  // Resets every term's uncertainty to the prior's (the covariance to its starting value):
  // after the batches' shapes moved (LengthShiftDetector) the next samples weigh as much as the
  // first ones did, instead of being held back by the certainty gathered on other shapes.
  void widen();

  OnlineFitState state() const;
  // Continues from a saved state (same prior and options as the fit that saved it). Error
  // naming `where` for a value no fit reaches: not finite, a negative term, scale, count,
  // variance or residual, a covariance that is not symmetric, more term samples than samples.
  void restore(const OnlineFitState& state, const std::string& where);

 private:
  using Vec = std::array<double, kNumOnlineTerms>;
  // Prediction and its derivative by each term (absolute units), at the current values.
  double predict_with_gradient(const ActionSample& s, Vec& gradient) const;
  void check_shape(const ActionSample& s) const;  // chunk and recompute layers
  double step_limit(int term) const;
  double floor_of(int term) const;    // 0, or a small part of a backward
  double ceiling_of(int term) const;  // max_factor_from_prior × the term's scale
  bool at_bound(int term, double step) const;
  std::array<Vec, kNumOnlineTerms> prior_covariance() const;  // in units of scale_

  CostModel prior_;
  OnlineFitOptions options_;
  Vec value_{};  // current terms, absolute units
  Vec scale_{};  // unit of each term in the recursion: its prior, or set by its first sample
  std::array<Vec, kNumOnlineTerms> cov_{};  // covariance, in units of scale_
  std::array<bool, kNumOnlineTerms> covered_{};
  std::array<int64_t, kNumOnlineTerms> term_count_{};
  std::array<int64_t, 2> count_{};
  std::array<double, 2> residual_sq_{}, residual_weight_{};
};

// The fitted terms of a set of coefficients, in OnlineTerm order, and back: how they travel (with
// a plan, between ranks).
std::array<double, kNumOnlineTerms> online_terms_get(const Coefficients& c);
void online_terms_set(std::span<const double> terms, Coefficients& c);  // Error unless 9 values

// A pipeline's ranks each fit their own stages' actions; the planner needs one set of
// coefficients. A rank's share is flat so one all-reduce sums the shares of a pipeline:
// per term, value × samples that covered it, then those samples; per action kind, squared
// residual × samples, then samples.
inline constexpr int kOnlineShareSize = 2 * kNumOnlineTerms + 4;
std::array<double, kOnlineShareSize> online_fit_share(const OnlineFit& fit);
// The pipeline's fit from its ranks' summed shares: each term the sample-weighted mean over the
// ranks that covered it, the prior's where none did; residuals pooled the same way.
struct OnlinePooled {
  Coefficients coeffs;
  double residual_forward = 0, residual_backward = 0;
};
OnlinePooled online_fit_pool(const CostModel& prior,
                             const std::array<double, kOnlineShareSize>& summed);

// Fitted coefficients as a calibration file `profile` would write (load with --calibration):
// the prior's model, device and memory terms, the fitted time terms, and the fit's residuals per
// action kind. `machine`, `date` and `notes` fill the metadata.
Calibration online_calibration(const CostModel& prior, const OnlinePooled& fitted,
                               const std::string& machine, const std::string& date,
                               const std::string& notes);
// The same for one rank's fit.
Calibration online_fit_calibration(const OnlineFit& fit, const std::string& machine,
                                   const std::string& date, const std::string& notes);

}  // namespace infinipipe::cost
