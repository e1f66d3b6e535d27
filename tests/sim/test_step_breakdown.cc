// The simulator's breakdown of each rank's busy time: all-to-alls and exposed ZeRO-3 collectives
// as the cost model charges them, the rest compute; together exactly the busy time.
#include <gtest/gtest.h>

#include <vector>

#include "plan/model_states.h"
#include "plan/planner.h"
#include "plan/schedule_memory.h"
#include "plan/test_plan_util.h"
#include "sim/simulator.h"

namespace infinipipe::sim {
namespace {

TEST(StepBreakdown, PartsAddUpToTheBusyTimeAndFollowTheCostModel) {
  for (int64_t zero : {1, 3}) {
    Config cfg = plan::testing::small_config(2, 1, 8);
    cfg.parallel.ulysses_degree = 4;
    cfg.parallel.zero_stage = zero;
    cfg.cluster.num_devices = 8;
    cfg.cluster.devices_per_node = 8;
    const auto cm = cost::CostModel::from_config(cfg);
    const plan::Plan p = plan::make_plan(cfg, cm, std::vector<int64_t>{4096, 2048, 512, 256});
    const StepResult r = simulate(p, cm, cfg);
    for (int32_t k = 0; k < p.pp; ++k) {
      double a2a = 0, zero3 = 0;
      for (const plan::Action& a : p.actions[k]) {
        const auto sh = p.chunks[a.chunk].shapes();
        const cost::StageShape st = plan::stage_shape(p.stages[a.stage]);
        const bool fwd = a.kind == plan::ActionKind::forward;
        a2a += cm.ulysses_alltoall_time(cost::chunk_tokens(sh)) *
               static_cast<double>(st.num_layers + (fwd ? 0 : a.recompute_layers));
        zero3 += fwd ? plan::zero3_forward_exposed_seconds(cm, cfg, sh, st, k)
                     : plan::zero3_backward_exposed_seconds(cm, cfg, sh, st, k);
      }
      EXPECT_NEAR(r.alltoall_time[k], a2a, 1e-12 + 1e-9 * a2a);
      EXPECT_NEAR(r.zero3_time[k], zero3, 1e-12 + 1e-9 * zero3);
      EXPECT_GT(r.alltoall_time[k], 0);
      EXPECT_EQ(r.zero3_time[k] > 0, zero == 3) << "rank " << k;
      EXPECT_NEAR(r.compute_time[k] + r.alltoall_time[k] + r.zero3_time[k], r.busy_time[k],
                  1e-9 * r.busy_time[k]);
      EXPECT_EQ(r.dp_sync_time[k] == 0, zero == 3 || cfg.parallel.ulysses_degree == 1);
    }
  }
}

}  // namespace
}  // namespace infinipipe::sim
