// A plan of ranks that share cores simulates to its predictions: the simulator replays each
// action's own time with the plan's hosts, as plan_predict did.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/test_plan_util.h"
#include "sim/simulator.h"

namespace infinipipe::sim {
namespace {

TEST(SimulatorCoreSharing, SharedCoresSimulateToThePlansPredictions) {
  Config cfg = plan::testing::small_config(2, 1, 8);
  cfg.parallel.data_parallel = 2;
  cfg.cluster.num_devices = 4;
  cfg.cluster.devices_per_node = 4;
  const auto cm = cost::CostModel::from_config(cfg);
  const std::vector<int64_t> lengths = {3000, 1500, 700, 200};
  // Sharing cores, one chunk is as fast as several overlapping ones: the budget of the plan with
  // cores of their own keeps several chunks, so that actions overlap.
  const plan::Plan own = plan::make_plan(cfg, cm, lengths);
  ASSERT_GT(own.chunks.size(), 1u);
  for (int64_t peak : own.predicted_peak_bytes)
    cfg.training.memory_budget = std::max(cfg.training.memory_budget, peak);
  const std::vector<cost::RankHost> demo = {{0, 2, 4}, {0, 2, 4}};
  const plan::Plan p = plan::make_plan(cfg, cm.with_rank_hosts(demo), lengths);
  const plan::Plan back = plan::plan_from_json(plan::plan_to_json(p));
  for (bool repredict : {false, true}) {
    SimOptions o;
    o.repredict = repredict;
    const StepResult r = simulate(back, cm, cfg, o);
    for (size_t k = 0; k < 2; ++k)
      for (size_t i = 0; i < p.actions[k].size(); ++i)
        EXPECT_NEAR(r.actions[k][i].end - r.actions[k][i].start, p.actions[k][i].predicted_time,
                    1e-12 * p.predicted_step_time);
    // Without the shared cores the step is shorter.
    plan::Plan bare = back;
    bare.rank_hosts.clear();
    o.repredict = true;
    EXPECT_LT(simulate(bare, cm, cfg, o).step_time, p.predicted_step_time);
  }
}

}  // namespace
}  // namespace infinipipe::sim
