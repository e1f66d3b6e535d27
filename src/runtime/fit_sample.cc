#include "runtime/fit_sample.h"

#include "cost/core_sharing.h"
#include "plan/validate.h"

namespace infinipipe::runtime {

PlanShares plan_shares(const plan::Plan& plan, const cost::CostModel& cost, const Config& cfg) {
  PlanShares out;
  if (!cost::cores_shared(plan.rank_hosts)) return out;
  const std::vector<std::vector<double>> own = plan::plan_action_seconds(plan, cost, cfg);
  for (size_t k = 0; k < plan.actions.size(); ++k)
    for (size_t i = 0; i < plan.actions[k].size(); ++i) {
      const plan::Action& a = plan.actions[k][i];
      out[{static_cast<int>(a.kind), a.stage, a.chunk}] = {own[k][i], a.predicted_time};
    }
  return out;
}

double action_fit_seconds(double wall_s, const ActionShare* share) {
  if (share == nullptr || !(share->own_s > 0) || !(share->wall_s > share->own_s)) return wall_s;
  return wall_s * (share->own_s / share->wall_s);
}

}  // namespace infinipipe::runtime
