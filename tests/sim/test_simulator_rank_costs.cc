// A plan made with per-rank costs simulates with them: the simulator reads the plan's own time
// terms, so a saved plan replays to its predicted step even given only the shared coefficients.
#include <gtest/gtest.h>

#include <vector>

#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/test_plan_util.h"
#include "sim/simulator.h"

namespace infinipipe::sim {
namespace {

TEST(SimulatorRankCosts, SavedPlanReplaysWithItsOwnRankCosts) {
  Config cfg = plan::testing::small_config(2, 1, 8);
  cfg.parallel.stage_layers = {4, 4};
  const auto cm = cost::CostModel::from_config(cfg);
  std::vector<cost::Coefficients> ranks(2, cm.coefficients());
  ranks[1].alpha2 *= 4;
  ranks[1].beta1 *= 4;
  const auto slow = cm.with_rank_coefficients(ranks);
  const plan::Plan p = plan::make_plan(cfg, slow, std::vector<int64_t>{3000, 1500, 700, 200});
  const plan::Plan back = plan::plan_from_json(plan::plan_to_json(p));
  SimOptions again;
  again.repredict = true;  // every action re-timed from the cost model, not its predicted_time
  const StepResult with_terms = simulate(back, cm, cfg, again);
  EXPECT_DOUBLE_EQ(with_terms.step_time, p.predicted_step_time);
  // Without the plan's terms the shared coefficients time rank 1 faster: the step is shorter.
  plan::Plan shared = back;
  shared.rank_time_terms.clear();
  EXPECT_LT(simulate(shared, cm, cfg, again).step_time, p.predicted_step_time);
}

}  // namespace
}  // namespace infinipipe::sim
