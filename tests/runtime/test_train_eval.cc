// The Trainer's evaluation in one process: the validation loss equals the loss of the same
// documents run whole through one engine, evaluation changes nothing of training, and a resumed
// run evaluates the very same documents; train_run puts the losses on exactly the evaluated
// iterations' records.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/reference_run.h"
#include "common/synth_corpus.h"
#include "common/tiny_train.h"
#include "common/trainer_dir_test.h"
#include "data/run_datasets.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

namespace fs = std::filesystem;

class TrainEvalTest : public testing::TrainerDirTest {
 protected:
  TrainEvalTest() : TrainerDirTest("train_eval") {}
  void SetUp() override {
    TrainerDirTest::SetUp();
    testing::synth_corpus_write_small((dir_ / "corpus").string(), 200);
  }

  // A budget tight enough for several chunks per batch, so plans slice and pack.
  TrainOptions options(int64_t iters) const {
    TrainOptions o = testing::tiny_train_options(2, iters, (dir_ / "corpus").string());
    Config& c = o.config;
    c.training.lr = 3e-3;
    c.training.seed = 9;
    c.training.split = "80,10,10";
    c.training.eval_interval = 2;
    c.training.eval_iters = 2;
    c.training.memory_budget = 5 << 20;
    c.validate();
    return o;
  }
};

TEST_F(TrainEvalTest, ValidLossEqualsTheDocumentsRunWhole) {
  const TrainOptions o = options(2);
  Trainer t(o);
  const Trainer::EvalResult r = t.evaluate(data::DataSplit::valid, 1);
  // The same documents: the second evaluation's two batches of the validation order.
  const TrainingConfig& tc = o.config.training;
  const data::RunDatasets rd = data::RunDatasets::open({tc.data_path, tc.split, "", "", ""});
  data::DocumentStream s = rd.stream(data::DataSplit::valid, tc.global_batch_size, 9);
  s.set_consumed_samples(tc.eval_iters * tc.global_batch_size);
  std::vector<std::vector<int32_t>> seqs;
  for (int b = 0; b < 2; ++b) {
    for (const data::DocumentRef& ref : s.next()) {
      auto tokens = rd.document_tokens(data::DataSplit::valid, ref, o.config.model.seq_length);
      if (!tokens.empty()) seqs.push_back(std::move(tokens));
    }
  }
  const testing::LossGrads whole = testing::reference_run(o.config.model, seqs, 9);
  EXPECT_NEAR(r.loss, whole.loss, 1e-5 * whole.loss);
  EXPECT_GT(t.last_eval_plan().chunks.size(), 1u);
  EXPECT_TRUE(t.last_eval_plan().forward_only);
}

TEST_F(TrainEvalTest, EvaluationChangesNothingAndResumesOnTheSameDocuments) {
  TrainOptions o = options(4);
  o.config.training.save = (dir_ / "ck").string();
  Trainer plain(o), evaluated(o);
  std::vector<double> valid;
  for (int i = 0; i < 4; ++i) {
    const obs::IterationMetrics a = plain.step();
    const obs::IterationMetrics b = evaluated.step();
    EXPECT_EQ(a.loss, b.loss) << "iteration " << i + 1;
    EXPECT_EQ(a.grad_norm, b.grad_norm);
    EXPECT_EQ(a.lr, b.lr);
    valid.push_back(evaluated.evaluate(data::DataSplit::valid, i).loss);
    if (i == 1) evaluated.save();
  }
  const std::vector<ParamRef> pa = plain.params(), pb = evaluated.params();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(std::memcmp(pa[i].value, pb[i].value, pa[i].numel * sizeof(float)), 0) << pa[i].name;
  }
  TrainOptions r = options(4);
  r.config.training.load = o.config.training.save;
  Trainer resumed(r);
  ASSERT_EQ(resumed.iteration(), 2);
  resumed.step();
  EXPECT_EQ(resumed.evaluate(data::DataSplit::valid, 2).loss, valid[2]);
}

// A blend of two datasets resumes from consumed_samples on the same documents: the resumed run's
// losses are the uninterrupted run's, bit for bit.
TEST_F(TrainEvalTest, BlendedRunResumesBitIdentical) {
  testing::synth_corpus_write_small((dir_ / "second").string(), 120);
  TrainOptions o = options(4);
  o.config.training.data_path =
      "0.3 " + (dir_ / "corpus").string() + " 0.7 " + (dir_ / "second").string();
  o.config.training.save = (dir_ / "blend").string();
  std::vector<double> losses;
  {
    Trainer t(o);
    for (int i = 0; i < 4; ++i) {
      losses.push_back(t.step().loss);
      if (i == 1) t.save();
    }
  }
  TrainOptions r = o;
  r.config.training.save.clear();
  r.config.training.load = o.config.training.save;
  Trainer resumed(r);
  ASSERT_EQ(resumed.consumed_samples(), 2 * o.config.training.global_batch_size);
  EXPECT_EQ(resumed.step().loss, losses[2]);
  EXPECT_EQ(resumed.step().loss, losses[3]);
  TrainOptions single = options(4);
  Trainer other(single);
  EXPECT_NE(other.step().loss, losses[0]) << "the blend trains on other documents";
}

TEST_F(TrainEvalTest, TrainRunRecordsTheLossesOnTheEvaluatedIterations) {
  const std::vector<obs::IterationMetrics> ms = train_run(options(5));
  ASSERT_EQ(ms.size(), 5u);
  for (const obs::IterationMetrics& m : ms) {
    // Every second iteration, and after the last (as Megatron's pretrain ends).
    EXPECT_EQ(m.valid_loss.has_value(), m.iteration % 2 == 0 || m.iteration == 5) << m.iteration;
    EXPECT_EQ(m.test_loss.has_value(), m.iteration == 5) << m.iteration;
    if (m.valid_loss) {
      EXPECT_GT(m.valid_tokens, 0);
    }
  }
  TrainOptions off = options(5);
  off.config.training.eval_iters = 0;
  for (const obs::IterationMetrics& m : train_run(off)) {
    EXPECT_FALSE(m.valid_loss || m.test_loss) << "--eval-iters 0 evaluates nothing";
  }
}

}  // namespace
}  // namespace infinipipe::runtime
