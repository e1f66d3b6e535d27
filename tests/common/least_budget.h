// The smallest memory budget the planner accepts for a batch, as its typed error reports it
// (plan::BudgetError): the tests that plan under a tight budget share it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/budget_error.h"
#include "plan/planner.h"

namespace infinipipe::testing {

inline int64_t least_budget(Config cfg, const cost::CostModel& cm,
                            const std::vector<int64_t>& lengths) {
  cfg.training.memory_budget = 1;
  try {
    plan::make_plan(cfg, cm, lengths);
  } catch (const plan::BudgetError& e) {
    return e.least_budget();
  }
  ADD_FAILURE() << "a 1-byte budget was accepted";
  return 0;
}

}  // namespace infinipipe::testing
