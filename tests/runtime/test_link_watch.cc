// Links measured again while training (runtime/link_watch.h), without MPI: when a rank's step is
// slow beyond the fit's noise, which measured links count as changed, and that the cost loop
// plans with the new links from then on.
#include <gtest/gtest.h>

#include <vector>

#include "common/tiny_model.h"
#include "cost/host_link_table.h"
#include "plan/planner.h"
#include "runtime/cost_loop.h"
#include "runtime/link_watch.h"

namespace infinipipe::runtime {
namespace {

TEST(LinkWatch, SlowStepBeyondTheNoiseOfTheStepsBefore) {
  LinkWatch w;
  // The first iterations are planned with the prior: any ratio, never a verdict.
  EXPECT_FALSE(w.step_slow(10.0, 1.0));
  EXPECT_FALSE(w.step_slow(0.1, 1.0));
  // A steady bias (the fit predicts 1.4x too little) is no verdict either, nor its noise.
  EXPECT_FALSE(w.step_slow(1.4, 1.0));
  EXPECT_FALSE(w.step_slow(1.5, 1.0));
  EXPECT_EQ(w.threshold(), 0) << "two ratios do not judge yet";
  EXPECT_FALSE(w.step_slow(1.3, 1.0));
  EXPECT_DOUBLE_EQ(w.threshold(), LinkWatch::kSlowFactor);
  EXPECT_FALSE(w.step_slow(1.9, 1.0)) << "1.9 / 1.4 is within the factor";
  EXPECT_TRUE(w.step_slow(3.0, 1.0)) << "3.0 / 1.45 is beyond it";
  // The slow step is not recorded: the next one like it is slow too.
  EXPECT_TRUE(w.step_slow(3.1, 1.0));
  // No prediction, no verdict.
  EXPECT_FALSE(w.step_slow(3.0, 0.0));
  // Measured again, a link changed: the steps are judged anew.
  w.restart();
  EXPECT_EQ(w.threshold(), 0);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(w.step_slow(3.0, 1.0));
  EXPECT_FALSE(w.step_slow(3.2, 1.0));
  EXPECT_TRUE(w.step_slow(6.0, 1.0));
}

// A false alarm (the links measured unchanged) does not hide the next slow step; a step that
// stays slow for another reason becomes the normal after a few measurements.
TEST(LinkWatch, UnchangedLinksKeepTheSlowStep) {
  LinkWatch w;
  w.step_slow(1, 1);
  w.step_slow(1, 1);
  for (double r : {1.9, 1.6, 1.7, 2.0, 2.0}) EXPECT_FALSE(w.step_slow(r, 1.0));
  EXPECT_TRUE(w.step_slow(2.9, 1.0)) << "2.9 / 1.9: beyond 1.5";
  w.keep();
  EXPECT_TRUE(w.step_slow(4.4, 1.0)) << "the link slowed now: still beyond the normal";
  int measured = 1;
  for (; measured < 10 && w.step_slow(4.4, 1.0); ++measured) w.keep();
  EXPECT_GE(measured, 2);
  EXPECT_LE(measured, 5) << "4.4 became the normal";
}

TEST(LinkWatch, NoisyStepsRaiseTheThreshold) {
  LinkWatch w;
  w.step_slow(1, 1);
  w.step_slow(1, 1);
  for (double r : {1.0, 2.0, 0.5, 1.0, 2.0}) EXPECT_FALSE(w.step_slow(r, 1.0));
  EXPECT_GT(w.threshold(), 2.0) << "ratios spread by 2x in either direction";
  EXPECT_FALSE(w.step_slow(1.9, 1.0));
}

cost::HostLinkTable slowed_two_hosts(double cross_bw, double cross_lat, double inside_bw) {
  cost::HostLinkTable t;
  t.hosts = {{"host-a", 2}, {"host-b", 1}};
  // host-b's inside: not measured (one rank there).
  t.links = {{inside_bw, 200e-6}, {cross_bw, cross_lat}, {cross_bw, cross_lat}, {0.0, 0.0}};
  return t;
}

TEST(LinkWatch, ChangesBeyondTheMeasurementNoise) {
  const cost::HostLinkTable before = slowed_two_hosts(117e6, 10e-6, 2000e6);
  EXPECT_TRUE(link_changes(before, slowed_two_hosts(100e6, 30e-6, 2400e6)).empty())
      << "within 25 % and 100 us";
  const std::vector<LinkChange> c = link_changes(before, slowed_two_hosts(5.9e6, 14e-6, 2000e6));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].a, 0u);
  EXPECT_EQ(c[0].b, 1u);
  EXPECT_EQ(link_change_text(before, c[0]),
            "host-a <-> host-b: 117 MB/s, 10 us -> 5.9 MB/s, 14 us");
  const std::vector<LinkChange> lat = link_changes(before, slowed_two_hosts(117e6, 400e-6, 2000e6));
  ASSERT_EQ(lat.size(), 1u) << "latency 40x and 390 us more";
}

Config slowed_links_config() {
  Config c;
  c.model = testing::tiny_train_model(4);
  c.parallel.pipeline_parallel = 2;
  c.parallel.min_tail_slice = 32;
  c.training.global_batch_size = 8;
  c.cluster.device = "cpu";
  c.validate();
  return c;
}

TEST(LinkWatch, TheCostLoopPlansWithTheNewLinks) {
  const Config cfg = slowed_links_config();
  const cost::RankGrid grid{2, 1, 1, RankOrder::megatron};  // rank 0 on host-a, 1 on host-b
  cost::HostLinkTable table = slowed_two_hosts(1e9, 1e-5, 1e10);
  table.hosts[0].slots = 1;
  table.links[0] = {};  // one rank on host-a too: nothing measured inside
  table.host_of_rank = {0, 1};
  const cost::CostModel prior =
      cost::CostModel::from_config(cfg).with_host_links(table).with_replica_links(grid, 0);
  CostLoop loop(cfg, prior, {.distributed = false, .pp = 2, .dp = 1});
  const std::vector<int64_t> lengths = {512, 300, 200, 120, 90, 60, 40, 20};
  const plan::Plan fast =
      plan::make_plan_detailed(cfg, loop.next_plan_cost_model(), lengths, cfg.parallel.schedule)
          .plan;
  table.links[1] = table.links[2] = {1e6, 1e-5};  // 1000x slower
  loop.links_set(table, grid);
  for (const cost::CostModel* cm : {&loop.prior(), &loop.next_plan_cost_model()})
    EXPECT_EQ(cm->pipeline_links().at(0, 1).bandwidth, 1e6);
  const cost::CostModel now = loop.plan_now_cost_model();
  EXPECT_EQ(now.pipeline_links().at(1, 0).bandwidth, 1e6);
  const plan::Plan slow = plan::make_plan_detailed(cfg, now, lengths, cfg.parallel.schedule).plan;
  // Every hop now takes its bytes / 1 MB/s: the step is predicted longer by at least two of
  // them (a chunk's activation out and its gradient back).
  EXPECT_GT(slow.predicted_step_time, fast.predicted_step_time + 2 * 20 * 64 * 4 / 1e6);
  // A plan's own cost model (what its actions are fitted with) carries the links too.
  const std::array<double, cost::kNumOnlineTerms> terms =
      cost::online_terms_get(prior.coefficients());
  EXPECT_EQ(loop.plan_cost_model(terms, slow).pipeline_links().at(0, 1).bandwidth, 1e6);
}

}  // namespace
}  // namespace infinipipe::runtime
