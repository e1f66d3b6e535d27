#include "cost/online_fit_step.h"

#include <cmath>

#include "core/error.h"

namespace infinipipe::cost {

StepCostFit::StepCostFit(double forgetting) : forgetting_(forgetting) {
  if (!(forgetting > 0 && forgetting <= 1))
    fail_config("step cost fit: forgetting factor must be in (0, 1], got {}", forgetting);
}

void StepCostFit::update(const StepCostSample& s) {
  const auto sane = [](double v) { return std::isfinite(v) && v >= 0; };
  if (s.actions < 0 || !sane(s.gap_sum_s) || !sane(s.tail_s))
    fail("step cost fit: {} actions, gaps {} s, tail {} s; each must be finite and >= 0",
         s.actions, s.gap_sum_s, s.tail_s);
  const double l = forgetting_;
  state_.weighted[0] = l * state_.weighted[0] + s.gap_sum_s;
  state_.weight[0] = l * state_.weight[0] + static_cast<double>(s.actions);
  state_.weighted[1] = l * state_.weighted[1] + s.tail_s;
  state_.weight[1] = l * state_.weight[1] + 1.0;
}

double StepCostFit::action_gap() const {
  return state_.weight[0] > 0 ? state_.weighted[0] / state_.weight[0] : 0.0;
}

double StepCostFit::tail() const {
  return state_.weight[1] > 0 ? state_.weighted[1] / state_.weight[1] : 0.0;
}

void StepCostFit::restore(const StepCostState& s, const std::string& where) {
  for (int k = 0; k < 2; ++k)
    if (!std::isfinite(s.weighted[k]) || s.weighted[k] < 0 || !std::isfinite(s.weight[k]) ||
        s.weight[k] < 0)
      fail("{}: step cost {} is {} over weight {}; each must be finite and >= 0", where,
           k == 0 ? "gap" : "tail", s.weighted[k], s.weight[k]);
  state_ = s;
}

}  // namespace infinipipe::cost
