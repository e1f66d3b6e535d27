// EPP plans on virtual stages simulate as planned: the discrete-event simulator, run on the
// plan's own action times and link times, ends the step when the planner's replay said, its
// memory curve peaks where the plan's trace does, and a saved plan (JSON) replays the same.
#include <gtest/gtest.h>

#include <vector>

#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/test_plan_util.h"
#include "sim/simulator.h"

namespace infinipipe::sim {
namespace {

TEST(SimulatorVstages, EppOnVirtualStagesSimulatesToItsPrediction) {
  for (int32_t pp : {2, 4}) {
    Config cfg = plan::testing::small_config(pp, 2, 16);
    cfg.model.seq_length = 16384;
    cfg.parallel.stage_layers.assign(size_t(pp) * 2, 16 / (pp * 2));  // vpp 2, as the trainer
    const auto cm = cost::CostModel::from_config(cfg);
    const plan::Plan p =
        plan::make_plan(cfg, cm, std::vector<int64_t>{16384, 9000, 3000, 1500, 700, 200, 90});
    ASSERT_EQ(p.vpp, 2);
    int64_t split = 0;
    for (const plan::Chunk& c : p.chunks) split += c.kind() == plan::ChunkKind::split;
    EXPECT_GT(split, 0) << "pp " << pp << ": the longest sequence is sliced";
    for (const plan::Plan& q : {p, plan::plan_from_json(plan::plan_to_json(p))}) {
      const StepResult r = simulate(q, cm, cfg);
      EXPECT_NEAR(r.step_time, p.predicted_step_time, 1e-9 * p.predicted_step_time) << "pp " << pp;
      ASSERT_EQ(r.peak_bytes.size(), size_t(pp));
      for (int32_t k = 0; k < pp; ++k) {
        EXPECT_EQ(r.peak_bytes[k], p.predicted_peak_bytes[k]) << "pp " << pp << " rank " << k;
        double busy = 0;
        for (const plan::Action& a : p.actions[k]) busy += a.predicted_time;
        EXPECT_NEAR(r.busy_time[k], busy, 1e-9 * busy) << "pp " << pp << " rank " << k;
      }
      EXPECT_FALSE(r.oom);
    }
  }
}

}  // namespace
}  // namespace infinipipe::sim
