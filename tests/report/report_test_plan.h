// The plan the report tests draw and compare: pp 4, a 3000-token sequence in three slices (the
// last packed with a short sequence) and two short sequences packed, EPP-scheduled, chunk 1
// recomputing `recompute_layers` layers on every stage, its action times predicted.
#pragma once

#include <cstdint>

#include "cost/cost_model.h"
#include "plan/plan.h"
#include "plan/schedule.h"
#include "plan/test_plan_util.h"
#include "plan/validate.h"

namespace infinipipe::testing {

inline plan::Plan report_test_plan(const Config& cfg, const cost::CostModel& cost,
                                   int32_t recompute_layers) {
  plan::Plan p = plan::testing::plan_from_chunks(cfg, {3000, 200, 300, 400},
                                                 {{{0, 0, 1000}},
                                                  {{0, 1000, 1000}},
                                                  {{0, 2000, 1000}, {1, 0, 200}},
                                                  {{2, 0, 300}, {3, 0, 400}}});
  plan::schedule_epp(p);
  for (auto& list : p.actions)
    for (auto& a : list)
      if (a.chunk == 1) a.recompute_layers = recompute_layers;
  plan::plan_predict(p, cost, cfg);
  return p;
}

}  // namespace infinipipe::testing
