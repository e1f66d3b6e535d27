#include "sim/compare.h"

#include <cmath>

#include <fmt/format.h>

#include "core/config.h"
#include "core/error.h"

namespace infinipipe::sim {
namespace {

double ratio(double measured, double predicted) {
  return predicted > 0 ? measured / predicted : 0.0;
}

}  // namespace

StepComparison step_compare(const StepResult& pred, const StepResult& meas) {
  if (pred.actions.size() != meas.actions.size())
    fail("cannot compare steps: {} ranks predicted, {} measured", pred.actions.size(),
         meas.actions.size());
  StepComparison c;
  c.step_time_ratio = ratio(meas.step_time, pred.step_time);
  double fp = 0, fm = 0, bp = 0, bm = 0, worst = 0;
  const size_t ranks = pred.actions.size();
  c.busy_ratio.assign(ranks, 0.0);
  c.peak_ratio.assign(ranks, 0.0);
  for (size_t k = 0; k < ranks; ++k) {
    const auto &p = pred.actions[k], &m = meas.actions[k];
    if (p.size() != m.size())
      fail("cannot compare steps: rank {} has {} predicted actions, {} measured", k, p.size(),
           m.size());
    double busy_p = 0, busy_m = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      const plan::Action &a = p[i].action, &b = m[i].action;
      if (a.kind != b.kind || a.chunk != b.chunk || a.stage != b.stage)
        fail(
            "cannot compare steps: rank {} action {} is {} of chunk {} on stage {} predicted but "
            "{} of chunk {} on stage {} measured",
            k, i, plan::action_kind_name(a.kind), a.chunk, a.stage, plan::action_kind_name(b.kind),
            b.chunk, b.stage);
      const double dp = p[i].end - p[i].start, dm = m[i].end - m[i].start;
      busy_p += dp;
      busy_m += dm;
      (a.kind == plan::ActionKind::forward ? fp : bp) += dp;
      (a.kind == plan::ActionKind::forward ? fm : bm) += dm;
      const double r = ratio(dm, dp);
      if (r > 0 && std::fabs(std::log(r)) > worst) {
        worst = std::fabs(std::log(r));
        c.worst_action_ratio = r;
        c.worst_rank = static_cast<int32_t>(k);
        c.worst_index = static_cast<int32_t>(i);
      }
    }
    c.busy_ratio[k] = ratio(busy_m, busy_p);
    if (k < pred.peak_bytes.size() && k < meas.peak_bytes.size())
      c.peak_ratio[k] =
          ratio(static_cast<double>(meas.peak_bytes[k]), static_cast<double>(pred.peak_bytes[k]));
  }
  c.forward_ratio = ratio(fm, fp);
  c.backward_ratio = ratio(bm, bp);
  return c;
}

std::string StepComparison::table() const {
  std::string s = fmt::format("measured/predicted: step {:.3f}, forward {:.3f}, backward {:.3f}",
                              step_time_ratio, forward_ratio, backward_ratio);
  if (worst_rank >= 0)
    s += fmt::format(", worst action {:.3f} (rank {} action {})", worst_action_ratio, worst_rank,
                     worst_index);
  s += "\nrank  busy   peak memory";
  for (size_t k = 0; k < busy_ratio.size(); ++k)
    s += fmt::format("\n{:>4}  {:.3f}  {:.3f}", k, busy_ratio[k], peak_ratio[k]);
  return s;
}

}  // namespace infinipipe::sim
