#include "runtime/cost_feedback.h"

#include <fmt/format.h>

#include "core/error.h"
#include "plan/schedule_memory.h"
#include "runtime/fit_sample.h"

namespace infinipipe::runtime {

CostFeedback::CostFeedback(const cost::CostModel& prior,
                           const std::optional<cost::Coefficients>& own)
    : prior_(prior),
      fit_(own ? cost::CostModel(prior.model(), prior.device(), *own, prior.ulysses_degree(),
                                 prior.bf16())
               : prior) {}

std::string CostFeedback::observe(const plan::Plan& plan, const cost::CostModel& plan_cost,
                                  const Config& cfg, std::span<const obs::ActionTiming> timings) {
  std::string note;
  if (const auto moved = length_shift_.observe(plan.seq_lengths)) {
    fit_.widen();
    note = *moved;
  }
  const PlanShares shares = plan_shares(plan, plan_cost, cfg);
  for (const obs::ActionTiming& t : timings) {
    const plan::Action& a = t.action;
    if (a.chunk < 0 || static_cast<size_t>(a.chunk) >= plan.chunks.size() || a.stage < 0 ||
        static_cast<size_t>(a.stage) >= plan.stages.size())
      fail("a measured action names chunk {} of stage {}, which the plan does not have", a.chunk,
           a.stage);
    cost::ActionSample s;
    s.chunk = plan.chunks[static_cast<size_t>(a.chunk)].shapes();
    s.stage = plan::stage_shape(plan.stages[static_cast<size_t>(a.stage)]);
    s.backward = a.kind == plan::ActionKind::backward;
    s.recompute_layers = s.backward ? a.recompute_layers : 0;
    const auto share = shares.find({static_cast<int>(a.kind), a.stage, a.chunk});
    s.seconds =
        action_fit_seconds(t.end_s - t.start_s, share == shares.end() ? nullptr : &share->second);
    // An action shorter than the clock's resolution tells nothing about the coefficients.
    if (s.seconds > 0) fit_.update(s);
  }
  return note;
}

cost::OnlinePooled CostFeedback::pool(const Share& summed) const {
  return cost::online_fit_pool(prior_, summed);
}

cost::CostModel CostFeedback::next_cost_model(const cost::OnlinePooled& pooled) const {
  return prior_.with_coefficients(pooled.coeffs).with_rank_hosts(prior_.rank_hosts());
}

}  // namespace infinipipe::runtime
