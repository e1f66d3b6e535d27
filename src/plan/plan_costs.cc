#include "plan/plan_costs.h"

#include "core/error.h"
#include "cost/online_fit.h"

namespace infinipipe::plan {

static_assert(kPlanTimeTerms == static_cast<size_t>(cost::kNumOnlineTerms));

std::vector<std::vector<double>> plan_rank_time_terms(const cost::CostModel& cm) {
  std::vector<std::vector<double>> out;
  for (const cost::Coefficients& c : cm.rank_coefficients()) {
    const auto terms = cost::online_terms_get(c);
    out.emplace_back(terms.begin(), terms.end());
  }
  return out;
}

std::vector<std::vector<double>> plan_rank_step_terms(const cost::CostModel& cm) {
  std::vector<std::vector<double>> out;
  bool any = false;
  for (const cost::Coefficients& c : cm.rank_coefficients()) {
    out.push_back({c.action_gap_s, c.step_tail_s});
    any = any || c.action_gap_s > 0 || c.step_tail_s > 0;
  }
  return any ? out : std::vector<std::vector<double>>{};
}

cost::CostModel plan_cost_model(const Plan& plan, const cost::CostModel& base) {
  if (!plan.rank_hosts.empty() && plan.rank_hosts.size() != static_cast<size_t>(plan.pp))
    fail("the plan names hosts for {} ranks, it has pp {}", plan.rank_hosts.size(), plan.pp);
  if (plan.rank_time_terms.empty() && plan.rank_step_terms.empty())
    return plan.rank_hosts.empty() ? base : base.with_rank_hosts(plan.rank_hosts);
  const size_t pp = static_cast<size_t>(plan.pp);
  for (const auto* list : {&plan.rank_time_terms, &plan.rank_step_terms})
    if (!list->empty() && list->size() != pp)
      fail("the plan carries time terms for {} ranks, it has pp {}", list->size(), plan.pp);
  std::vector<cost::Coefficients> ranks(pp, base.coefficients());
  for (size_t r = 0; r < pp; ++r) {
    // Error unless kNumOnlineTerms values
    if (!plan.rank_time_terms.empty()) cost::online_terms_set(plan.rank_time_terms[r], ranks[r]);
    if (plan.rank_step_terms.empty()) continue;
    if (plan.rank_step_terms[r].size() != kPlanStepTerms)
      fail("the plan carries {} step terms for rank {}; expected {}",
           plan.rank_step_terms[r].size(), r, kPlanStepTerms);
    ranks[r].action_gap_s = plan.rank_step_terms[r][0];
    ranks[r].step_tail_s = plan.rank_step_terms[r][1];
  }
  cost::CostModel out = base.with_rank_coefficients(std::move(ranks));
  return plan.rank_hosts.empty() ? out : out.with_rank_hosts(plan.rank_hosts);
}

}  // namespace infinipipe::plan
