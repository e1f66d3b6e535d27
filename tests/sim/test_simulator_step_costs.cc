// A plan carrying its ranks' measured step costs simulates to its predicted step: the simulator
// charges the same gaps and tails as the replay, and a measured tail (which holds the exposed
// data-parallel all-reduce) replaces the modelled all-reduce.
#include <gtest/gtest.h>

#include <vector>

#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/test_plan_util.h"
#include "sim/simulator.h"

namespace infinipipe::sim {
namespace {

TEST(SimulatorStepCosts, SimulatedStepEqualsThePredictedOneWithAndWithoutDataParallelism) {
  for (int64_t dp : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "dp " << dp);
    Config cfg = plan::testing::small_config(2, 1, 8);
    cfg.parallel.data_parallel = dp;
    cfg.cluster.num_devices = 2 * dp;
    cfg.cluster.devices_per_node = 2 * dp;
    cfg.parallel.stage_layers = {4, 4};
    const auto cm = cost::CostModel::from_config(cfg);
    std::vector<cost::Coefficients> ranks(2, cm.coefficients());
    ranks[0].action_gap_s = 2e-3;
    ranks[0].step_tail_s = 0.4;
    ranks[1].action_gap_s = 1e-3;
    ranks[1].step_tail_s = 0.05;
    const plan::Plan p = plan::make_plan(cfg, cm.with_rank_coefficients(ranks),
                                         std::vector<int64_t>{3000, 1500, 700, 200});
    const plan::Plan back = plan::plan_from_json(plan::plan_to_json(p));
    SimOptions again;
    again.repredict = true;
    const StepResult r = simulate(back, cm, cfg, again);
    EXPECT_DOUBLE_EQ(r.step_time, p.predicted_step_time);
    // Without them: shorter by at least rank 0's tail less the modelled all-reduce.
    plan::Plan bare = back;
    bare.rank_step_terms.clear();
    const StepResult b = simulate(bare, cm, cfg, again);
    EXPECT_LT(b.step_time + 0.4 - b.dp_sync_time[0], r.step_time);
  }
}

}  // namespace
}  // namespace infinipipe::sim
