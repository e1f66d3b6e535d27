// The Trainer with --outlier-delay under mpirun (pp 1 × dp 2): a run stopped while outliers wait
// in the queue resumes from its checkpoint with the uninterrupted run's batches (losses bit for
// bit), and a checkpoint holding delayed documents refuses to resume without the delay.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "comm/mpi_groups.h"
#include "core/error.h"
#include "data/synth.h"
#include "dist_test_util.h"
#include "dist_train_fixture.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

constexpr int64_t kOutlierIters = 10;

class DistOutlierDelay : public disttest_fixture::DistTrainFixture {
 protected:
  void SetUp() override {
    DistTrainFixture::SetUp();
    if (!disttest::under_mpirun()) return;
    // Web-like lengths up to 4096 tokens: in a batch of 4 a long document often costs more
    // than the other three together, more than a replica's share.
    corpus_write_shared("web", "commoncrawl", 120, 4096, 3);
  }

  TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const override {
    TrainOptions o = options_base(pp, dp, schedule, iters, Optimizer::adamw, false);
    Config& c = o.config;
    c.model.num_layers = 2;
    c.model.seq_length = 4096;
    c.training.global_batch_size = 4;
    c.training.data_path = (dir_ / "web").string();
    c.parallel.outlier_delay = true;
    c.validate();
    return o;
  }
};

TEST_F(DistOutlierDelay, ResumeWithOutliersQueuedIsBitIdentical) {
  DIST_TEST_RANKS(2);
  ProcessGroups groups(disttest::test_comm(), 1, 2);
  TrainOptions o = options(1, 2, Schedule::epp, kOutlierIters);
  o.groups = &groups;
  std::vector<double> whole;
  {
    Trainer t(o);
    for (int64_t i = 0; i < kOutlierIters; ++i) whole.push_back(t.step().loss);
  }
  const std::string save = (dir_ / "ckpt").string();
  int64_t stopped = 0;
  {
    TrainOptions os = o;
    os.config.training.save = save;
    Trainer t(os);
    while (stopped < kOutlierIters - 2) {
      const double loss = t.step().loss;
      EXPECT_EQ(loss, whole[static_cast<size_t>(stopped)]) << "iteration " << stopped + 1;
      ++stopped;
      if (t.delayed_documents() > 0 && stopped >= 2) break;
    }
    ASSERT_GT(t.delayed_documents(), 0) << "the corpus must leave documents waiting";
    t.save();
  }
  TrainOptions ol = o;
  ol.config.training.load = save;
  Trainer t(ol);
  ASSERT_EQ(t.iteration(), stopped);
  EXPECT_GT(t.delayed_documents(), 0) << "the queue comes back from the checkpoint";
  for (int64_t i = stopped; i < kOutlierIters; ++i)
    EXPECT_EQ(t.step().loss, whole[static_cast<size_t>(i)]) << "resumed iteration " << i + 1;

  TrainOptions off = ol;
  off.config.parallel.outlier_delay = false;
  EXPECT_THROW(Trainer{off}, ConfigError) << "delayed documents must not be dropped";
}

}  // namespace
}  // namespace infinipipe::runtime
