// Measured links (train --measure-links): the replay times each transfer by the link between the
// two pipeline ranks it crosses, so a slow link lengthens the predicted step the planner ranks
// plans by; without links the intra/inter-node coefficients apply as before.
#include <gtest/gtest.h>

#include "core/error.h"
#include "cost/cost_model.h"
#include "cost/pipeline_links.h"
#include "plan/schedule.h"
#include "plan/schedule_replay.h"
#include "plan/validate.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

cost::PipelineLinks links_of_two(double bandwidth, double latency_s) {
  cost::PipelineLinks l;
  l.pp = 2;
  l.pair = {{}, {bandwidth, latency_s}, {bandwidth, latency_s}, {}};
  return l;
}

TEST(PipelineLinks, ReplayTimesTransfersByTheMeasuredLink) {
  Config cfg = small_config(2);
  const cost::CostModel base = cost::CostModel::from_config(cfg);
  const cost::CostModel slow = base.with_pipeline_links(links_of_two(1e6, 1e-3));
  Plan p =
      testing::plan_from_chunks(cfg, {3000, 100}, {{{0, 0, 2000}}, {{0, 2000, 1000}, {1, 0, 100}}});
  schedule_epp(p);
  const std::vector<double> with = replay_transfer_times(p, slow, cfg);
  const std::vector<double> without = replay_transfer_times(p, base, cfg);
  for (size_t c = 0; c < p.chunks.size(); ++c) {
    const int64_t bytes = base.p2p_bytes(p.chunks[c].shapes());
    ASSERT_GT(bytes, 0);
    EXPECT_DOUBLE_EQ(with[c * 2], static_cast<double>(bytes) / 1e6 + 1e-3) << "chunk " << c;
    EXPECT_DOUBLE_EQ(without[c * 2], base.p2p_time(bytes, false)) << "chunk " << c;
  }
  plan_predict(p, base, cfg);
  const double fast_step = p.predicted_step_time;
  plan_predict(p, slow, cfg);
  EXPECT_GT(p.predicted_step_time, fast_step);
}

TEST(PipelineLinks, RefusesALinkWithoutBandwidth) {
  Config cfg = small_config(2);
  const cost::CostModel base = cost::CostModel::from_config(cfg);
  EXPECT_THROW(base.with_pipeline_links(links_of_two(0, 1e-3)), Error);
  cost::PipelineLinks wrong = links_of_two(1e9, 0);
  wrong.pair.pop_back();
  EXPECT_THROW(base.with_pipeline_links(wrong), Error);
}

}  // namespace
}  // namespace infinipipe::plan
