// Parallelism never changes the maths (invariant 1 of docs/architecture.md), across processes: a
// global batch split over dp replicas, each replica's plan run over pp ranks with MPI
// point-to-point, the gradients summed over dp, gives the loss and gradients of one engine running
// every sequence whole, to fp32 round-off, for every schedule, with and without recompute.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_groups.h"
#include "comm/mpi_p2p.h"
#include "common/least_budget.h"
#include "common/plan_engines.h"
#include "common/random_tokens.h"
#include "common/reference_run.h"
#include "common/tensor_close.h"
#include "common/tiny_model.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "dist_test_util.h"
#include "plan/budget_error.h"
#include "plan/planner.h"
#include "plan/schedule_table.h"
#include "runtime/dist_step.h"

namespace infinipipe::runtime {
namespace {

const std::vector<int64_t> kLengths{256, 40, 17, 200, 5, 96, 2, 130, 64, 31, 150, 77};
constexpr uint64_t kSeed = 7;
constexpr int64_t kBucketBytes = 64 << 10;

Config dist_config(int64_t pp, int64_t dp, Schedule schedule, int64_t layers) {
  Config c;
  c.model = testing::tiny_train_model(layers);
  // untied, the model these tests were written for (Megatron-LM ties by default)
  c.model.tie_embeddings = false;
  c.parallel.pipeline_parallel = pp;
  c.parallel.data_parallel = dp;
  c.parallel.schedule = schedule;
  if (schedule == Schedule::interleaved) c.parallel.virtual_stages = 2;
  c.parallel.min_tail_slice = 16;
  c.training.global_batch_size = static_cast<int64_t>(kLengths.size());
  c.cluster.device = "cpu";
  c.validate();
  return c;
}

using testing::least_budget;

// This replica's share of the global batch: its sequences' lengths and tokens.
struct ReplicaShare {
  std::vector<int64_t> lengths;
  std::vector<std::vector<int32_t>> seqs;
};

ReplicaShare replica_share(const std::vector<int32_t>& indices,
                           const std::vector<std::vector<int32_t>>& seqs) {
  ReplicaShare share;
  for (int32_t i : indices) {
    share.lengths.push_back(kLengths[static_cast<size_t>(i)]);
    share.seqs.push_back(seqs[static_cast<size_t>(i)]);
  }
  return share;
}

// Every replica plans under the same budget: a little above the largest least budget of any.
int64_t tight_budget(const Config& cfg, const cost::CostModel& cm,
                     const std::vector<std::vector<int32_t>>& split) {
  int64_t least = 0;
  for (const auto& share : split) {
    std::vector<int64_t> ls;
    for (int32_t i : share) ls.push_back(kLengths[static_cast<size_t>(i)]);
    least = std::max(least, least_budget(cfg, cm, ls));
  }
  return least + least / 50;
}

// With dp > 1 every bucket is reported, in order, on the executor's clock. All start inside the
// rank's last backward (the final ones as its last part, the embedding or layer 0, ends), none in
// finish(), and the first well before that backward ends (exec_end).
void expect_buckets_overlap(const DistGradReducer& grads,
                            const std::vector<obs::EventTiming>& buckets, double exec_end,
                            const std::string& what) {
  const int nb = grads.buckets().num_buckets();
  ASSERT_GT(nb, 2) << what;
  ASSERT_EQ(buckets.size(), static_cast<size_t>(nb)) << what;
  for (const obs::EventTiming& e : buckets) {
    EXPECT_EQ(e.category, "allreduce") << what;
    EXPECT_LE(e.start_s, e.end_s) << what << ": " << e.name;
    EXPECT_GT(e.start_s, 0) << what << ": " << e.name;
  }
  EXPECT_EQ(grads.buckets().last_started_early(), nb) << what;
  EXPECT_LT(buckets.front().start_s, exec_end) << what << ": no overlap with backward";
}

// Runs the global batch on this rank's (stage, replica) and checks loss and gradients against the
// single-engine reference. tight: plans under (a little above) the least budget, so the
// recompute solver recomputes.
void expect_dist_matches(int64_t pp, int64_t dp, Schedule schedule, bool tight) {
  Comm& comm = disttest::test_comm();
  const int64_t layers = pp * (schedule == Schedule::interleaved ? 2 : 1);
  Config cfg = dist_config(pp, dp, schedule, std::max<int64_t>(layers, 2));
  const auto cm = cost::CostModel::from_config(cfg);
  const auto seqs = testing::random_tokens(kLengths, 256, 11);
  const testing::LossGrads ref = testing::reference_run(cfg.model, seqs, kSeed);
  const std::string what = fmt::format("pp {} dp {} {}{}", pp, dp, plan::schedule_name(schedule),
                                       tight ? " under a tight budget" : "");

  ProcessGroups groups(comm, pp, dp);
  const RankLayout& l = groups.layout();
  const auto split = dist_replica_split(kLengths, dp, cm, cfg);
  ASSERT_EQ(split.size(), static_cast<size_t>(dp));
  const ReplicaShare mine = replica_share(split[static_cast<size_t>(l.replica)], seqs);
  if (tight) {
    cfg.training.memory_budget = tight_budget(cfg, cm, split);
    ASSERT_GT(cfg.training.memory_budget, 0);
  }
  const plan::Plan plan = plan::make_plan(cfg, cm, mine.lengths);
  int64_t recompute = 0;
  for (const auto& list : plan.actions)
    for (const plan::Action& a : list) recompute += a.recompute_layers;
  if (tight) {
    EXPECT_GT(recompute, 0) << what << ": the tight budget should force recompute";
  }

  MemoryTracker tracker;
  const testing::PlanEngines engines =
      testing::plan_engines(cfg.model, plan, kSeed, tracker, l.stage);
  ASSERT_FALSE(engines.owned.empty());

  P2p p2p(groups, comm.options().p2p_timeout_s);
  // Small buckets, so several start while backward still runs (overlap) and the model's
  // gradients are spread over many of them.
  DistGradReducer grads(groups, engines.by_stage, 30.0, kBucketBytes);
  const double scale = 1.0 / static_cast<double>(batch_predicted_tokens(kLengths));
  const obs::StepStats stats = dist_execute_plan(plan, engines.by_stage, p2p, cfg.model.hidden_size,
                                                 tracker, mine.seqs, scale, nullptr, 0, &grads);
  EXPECT_EQ(stats.timings.size(), plan.actions[static_cast<size_t>(l.stage)].size());
  for (const auto& e : engines.owned) EXPECT_EQ(e->num_stashed_chunks(), 0u) << what;

  const double loss_sum = allreduce_sum(comm.world(), stats.loss_sum, 30.0, "the test's loss sum");
  const int64_t tokens =
      allreduce_sum(comm.world(), stats.predicted_tokens, 30.0, "the test's token count");
  EXPECT_EQ(tokens, batch_predicted_tokens(kLengths)) << what;
  EXPECT_NEAR(loss_sum * scale, ref.loss, 1e-5 * std::fabs(ref.loss)) << what;

  const double exec_end = stats.timings.empty() ? 0 : stats.timings.back().end_s;
  std::vector<obs::EventTiming> buckets;  // the all-reduce's events (the link adds p2p waits)
  grads.finish("the test's gradient all-reduce", buckets);
  if (dp > 1) {
    expect_buckets_overlap(grads, buckets, exec_end, what);
  } else {
    EXPECT_TRUE(buckets.empty()) << what;
  }
  for (const auto& e : engines.owned) {
    for (const ParamRef& p : e->params().params()) {
      EXPECT_TRUE(
          testing::tensor_close({p.grad, static_cast<size_t>(p.numel)}, ref.grads.at(p.name), 1e-5))
          << what << ": gradient of " << p.name;
    }
  }
}

class DistExecutor : public ::testing::Test {
 protected:
  void SetUp() override { omp_set_num_threads(1); }
};

TEST_F(DistExecutor, Pp2EppMatchesOneEngine) {
  DIST_TEST_RANKS(2);
  expect_dist_matches(2, 1, Schedule::epp, false);
  expect_dist_matches(2, 1, Schedule::epp, true);
}

TEST_F(DistExecutor, Pp2BatchLevelSchedulesMatchOneEngine) {
  DIST_TEST_RANKS(2);
  expect_dist_matches(2, 1, Schedule::one_f_one_b, false);
  expect_dist_matches(2, 1, Schedule::one_f_one_b, true);
}

TEST_F(DistExecutor, Pp2OtherSchedulesMatchOneEngine) {
  DIST_TEST_RANKS(2);
  expect_dist_matches(2, 1, Schedule::seq1f1b, false);
  expect_dist_matches(2, 1, Schedule::interleaved, false);
  expect_dist_matches(2, 1, Schedule::gpipe, false);
}

TEST_F(DistExecutor, Pp4MatchesOneEngine) {
  DIST_TEST_RANKS(4);
  expect_dist_matches(4, 1, Schedule::epp, false);
  expect_dist_matches(4, 1, Schedule::epp, true);
  expect_dist_matches(4, 1, Schedule::one_f_one_b, false);
}

TEST_F(DistExecutor, Pp2Dp2MatchesOneEngine) {
  DIST_TEST_RANKS(4);
  expect_dist_matches(2, 2, Schedule::epp, false);
  expect_dist_matches(2, 2, Schedule::epp, true);
  expect_dist_matches(2, 2, Schedule::one_f_one_b, false);
}

}  // namespace
}  // namespace infinipipe::runtime
