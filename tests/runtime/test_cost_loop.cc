// The online cost loop on its own (runtime/cost_loop.h), without a Trainer or MPI: two ranks of a
// pipeline, threads here, pool through the sum they are given into what two CostFeedbacks pool
// from their summed shares; its state survives a checkpoint exactly; off, it is the prior.
#include <gtest/gtest.h>

#include <barrier>
#include <filesystem>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ckpt/checkpoint.h"
#include "common/test_temp.h"
#include "common/tiny_model.h"
#include "cost/online_fit.h"
#include "plan/plan_costs.h"
#include "plan/planner.h"
#include "runtime/cost_feedback.h"
#include "runtime/cost_loop.h"

namespace infinipipe::runtime {
namespace {

Config loop_config(int64_t pp, CostModelUpdate update) {
  Config c;
  c.model = testing::tiny_train_model(4);
  c.parallel.pipeline_parallel = pp;
  c.parallel.min_tail_slice = 32;
  c.training.global_batch_size = 8;
  c.cluster.device = "cpu";
  c.training.cost_model_update = update;
  c.validate();
  return c;
}

plan::Plan loop_plan(const Config& cfg, const cost::CostModel& cm,
                     const std::vector<int64_t>& lengths) {
  return plan::make_plan_detailed(cfg, cm, lengths, cfg.parallel.schedule).plan;
}

// Pipeline rank `rank`'s actions of `plan` as if measured: each `slowdown` times its prediction,
// a little more for every third, so the fit has something to learn.
obs::StepStats measured_stats(const plan::Plan& plan, size_t rank, double slowdown) {
  obs::StepStats s;
  double clock = 0;
  const std::vector<plan::Action>& actions = plan.actions[rank];
  for (size_t i = 0; i < actions.size(); ++i) {
    obs::ActionTiming t;
    t.action = actions[i];
    t.start_s = clock;
    t.end_s = clock + actions[i].predicted_time * (slowdown + 0.2 * static_cast<double>(i % 3));
    clock = t.end_s;
    s.timings.push_back(t);
  }
  return s;
}

// A sum over `ranks` threads standing for the ranks of a pipeline: each puts its values in its
// slot, and once all did, every one reads the total.
class ThreadRankSum {
 public:
  explicit ThreadRankSum(int ranks)
      : slots_(static_cast<size_t>(ranks)), sync_(ranks, Total{this}) {}

  void operator()(int rank, std::span<double> values) {
    slots_[static_cast<size_t>(rank)].assign(values.begin(), values.end());
    sync_.arrive_and_wait();  // the last to arrive adds the slots up
    std::copy(total_.begin(), total_.end(), values.begin());
    sync_.arrive_and_wait();  // nobody refills a slot before every rank read the total
  }

 private:
  struct Total {
    ThreadRankSum* sum;
    void operator()() noexcept {
      sum->total_.assign(sum->slots_.front().size(), 0.0);
      for (const std::vector<double>& s : sum->slots_)
        for (size_t i = 0; i < s.size(); ++i) sum->total_[i] += s[i];
    }
  };
  std::vector<std::vector<double>> slots_;
  std::vector<double> total_;
  std::barrier<Total> sync_;
};

TEST(CostLoop, PoolingThroughTheGivenSumEqualsThePooledFitOfTheTwoRanks) {
  const Config cfg = loop_config(2, CostModelUpdate::online);
  const cost::CostModel prior = cost::CostModel::from_config(cfg);
  const plan::Plan plan = loop_plan(cfg, prior, {256, 200, 120, 64, 64, 32, 250, 180});
  const cost::CostModel plan_cost = plan::plan_cost_model(plan, prior);
  const std::vector<obs::StepStats> stats = {measured_stats(plan, 0, 1.5),
                                             measured_stats(plan, 1, 2.5)};

  // What the two ranks pool, from CostFeedbacks and a sum made here.
  std::vector<CostFeedback> feedback(2, CostFeedback(prior));
  CostFeedback::Share summed{};
  for (size_t r = 0; r < 2; ++r) {
    feedback[r].observe(plan, plan_cost, cfg, stats[r].timings);
    const CostFeedback::Share share = feedback[r].share();
    for (size_t i = 0; i < summed.size(); ++i) summed[i] += share[i];
  }
  const cost::OnlinePooled pooled = feedback[0].pool(summed);

  ThreadRankSum sum(2);
  std::vector<std::string> sums_named;  // by rank 0
  std::vector<cost::CostModel> next(2, prior);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      CostLoopCollectives c;
      c.pipeline_sum = [&, r](std::span<double> values, const std::string& what) {
        if (r == 0) sums_named.push_back(what);
        sum(r, values);
      };
      CostLoop loop(cfg, prior, {.distributed = true, .pp = 2, .dp = 1, .stage = r}, c);
      const std::span<const obs::StepStats> mine(&stats[static_cast<size_t>(r)], 1);
      loop.actions_measured(mine);
      next[static_cast<size_t>(r)] = loop.observe(plan, plan_cost, cfg, mine, 1);
      loop.step_end();
    });
  }
  for (std::thread& t : ranks) t.join();

  ASSERT_EQ(sums_named.size(), 2u) << "the pooled share, then the ranks' own terms";
  EXPECT_EQ(sums_named[0], "the cost model's refit of iteration 1");
  const auto pooled_terms = cost::online_terms_get(pooled.coeffs);
  EXPECT_NE(pooled_terms, cost::online_terms_get(prior.coefficients())) << "the fit never moved";
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(cost::online_terms_get(next[r].coefficients()), pooled_terms) << "rank " << r;
    ASSERT_EQ(next[r].rank_coefficients().size(), 2u);
    // Every rank times each rank's stages with that rank's own fit.
    for (size_t k = 0; k < 2; ++k)
      EXPECT_EQ(cost::online_terms_get(next[r].rank_coefficients()[k]),
                cost::online_terms_get(feedback[k].fit().coefficients()))
          << "rank " << r << " on rank " << k;
  }
}

class CostLoopState : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::test_temp_path("cost_loop_state");
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The loop's state in a checkpoint of iteration `iteration`, and the cost-fit file it wrote.
  std::string checkpoint(const CostLoop& loop, const Config& cfg, int64_t iteration) const {
    CheckpointShard shard;
    loop.save(shard, false, iteration);
    CheckpointMeta meta;
    meta.iteration = iteration;
    meta.model = cfg.model;
    checkpoint_save(dir_.string(), meta, shard);
    const auto file = shard.small_files.find("cost-fit-rank00000.json");
    return file == shard.small_files.end() ? "" : file->second;
  }

  std::filesystem::path dir_;
};

// One process running a pipeline of two stages: both ranks' stats go to the one loop.
void observe_batch(CostLoop& loop, const Config& cfg, const std::vector<int64_t>& lengths,
                   int64_t iteration) {
  const plan::Plan plan = loop_plan(cfg, loop.plan_now_cost_model(), lengths);
  const cost::CostModel plan_cost = plan::plan_cost_model(plan, loop.prior());
  const std::vector<obs::StepStats> stats = {measured_stats(plan, 0, 1.5),
                                             measured_stats(plan, 1, 2.0)};
  loop.actions_measured(stats);
  loop.observe(plan, plan_cost, cfg, stats, iteration);
  loop.step_end();
}

TEST_F(CostLoopState, SaveAndLoadContinueTheSameLoop) {
  const Config cfg = loop_config(2, CostModelUpdate::online);
  const cost::CostModel prior = cost::CostModel::from_config(cfg);
  CostLoop saved(cfg, prior, {.pp = 2});
  observe_batch(saved, cfg, {64, 64, 32, 48, 60, 40, 64, 50}, 1);
  observe_batch(saved, cfg, {250, 240, 200, 180, 120, 64, 64, 32}, 2);  // longer: a length shift
  EXPECT_NE(saved.length_shift_note().find("iteration 2: "), std::string::npos)
      << saved.length_shift_note();
  const cost::CostModel before_refit = saved.next_plan_cost_model();
  observe_batch(saved, cfg, {256, 200, 120, 64, 64, 32, 250, 180}, 3);
  const std::string file = checkpoint(saved, cfg, 3);
  ASSERT_FALSE(file.empty());

  CostLoop loaded(cfg, prior, {.pp = 2});
  CheckpointReader reader(dir_.string());
  loaded.load(reader);
  EXPECT_NE(loaded.resume_note().find("resumed the online cost fit"), std::string::npos)
      << loaded.resume_note();
  EXPECT_EQ(cost::online_terms_get(loaded.next_plan_cost_model().coefficients()),
            cost::online_terms_get(saved.next_plan_cost_model().coefficients()));
  const cost::Calibration cal_saved = *saved.calibration(), cal_loaded = *loaded.calibration();
  EXPECT_EQ(cost::online_terms_get(cal_loaded.coeffs), cost::online_terms_get(cal_saved.coeffs));
  EXPECT_EQ(cal_loaded.fit_residual_forward, cal_saved.fit_residual_forward);
  EXPECT_EQ(cal_loaded.fit_residual_backward, cal_saved.fit_residual_backward);
  // The next batch is planned as the uninterrupted run's background planner planned it: with the
  // model before the last refit; after it, with the next plans'.
  EXPECT_EQ(cost::online_terms_get(loaded.plan_now_cost_model().coefficients()),
            cost::online_terms_get(before_refit.coefficients()));
  EXPECT_EQ(cost::online_terms_get(loaded.plan_now_cost_model().coefficients()),
            cost::online_terms_get(saved.next_plan_cost_model().coefficients()));

  // The same batch into both: the recursion continued exactly, so their states are the same
  // bytes.
  (void)saved.plan_now_cost_model();
  observe_batch(saved, cfg, {128, 128, 96, 64, 200, 32, 150, 180}, 4);
  observe_batch(loaded, cfg, {128, 128, 96, 64, 200, 32, 150, 180}, 4);
  CheckpointShard a, b;
  saved.save(a, false, 4);
  loaded.save(b, false, 4);
  EXPECT_EQ(a.small_files, b.small_files);
  EXPECT_NE(a.small_files.begin()->second, file) << "the fourth batch changed nothing";
}

TEST_F(CostLoopState, OffItIsThePriorAndSavesNothing) {
  const Config cfg = loop_config(2, CostModelUpdate::off);
  const cost::CostModel prior = cost::CostModel::from_config(cfg);
  CostLoop loop(cfg, prior, {.pp = 2});
  EXPECT_FALSE(loop.online());
  observe_batch(loop, cfg, {64, 64, 32, 48, 60, 40, 64, 50}, 1);
  EXPECT_EQ(cost::online_terms_get(loop.next_plan_cost_model().coefficients()),
            cost::online_terms_get(prior.coefficients()));
  EXPECT_FALSE(loop.calibration().has_value());
  EXPECT_EQ(checkpoint(loop, cfg, 1), "");
  CheckpointReader reader(dir_.string());
  loop.load(reader);
  EXPECT_EQ(loop.resume_note(), "");
}

TEST_F(CostLoopState, CheckpointOfAnotherLayoutStartsFromTheCalibration) {
  const Config two = loop_config(2, CostModelUpdate::online);
  CostLoop saved(two, cost::CostModel::from_config(two), {.pp = 2});
  observe_batch(saved, two, {64, 64, 32, 48, 60, 40, 64, 50}, 1);
  checkpoint(saved, two, 1);

  const Config one = loop_config(1, CostModelUpdate::online);
  const cost::CostModel prior = cost::CostModel::from_config(one);
  CostLoop loaded(one, prior, {.pp = 1});
  CheckpointReader reader(dir_.string());
  loaded.load(reader);
  EXPECT_NE(loaded.resume_note().find("starts from the calibration"), std::string::npos)
      << loaded.resume_note();
  EXPECT_EQ(cost::online_terms_get(loaded.calibration()->coeffs),
            cost::online_terms_get(prior.coefficients()));
}

}  // namespace
}  // namespace infinipipe::runtime
