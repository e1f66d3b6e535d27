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

cost::CostModel plan_cost_model(const Plan& plan, const cost::CostModel& base) {
  if (plan.rank_time_terms.empty()) return base;
  if (plan.rank_time_terms.size() != static_cast<size_t>(plan.pp))
    fail("the plan carries time terms for {} ranks, it has pp {}", plan.rank_time_terms.size(),
         plan.pp);
  std::vector<cost::Coefficients> ranks;
  for (const std::vector<double>& terms : plan.rank_time_terms) {
    cost::Coefficients c = base.coefficients();
    cost::online_terms_set(terms, c);  // Error unless kNumOnlineTerms values
    ranks.push_back(c);
  }
  return base.with_rank_coefficients(std::move(ranks));
}

}  // namespace infinipipe::plan
