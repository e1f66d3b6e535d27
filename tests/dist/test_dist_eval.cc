// The validation loss under mpirun: forward-only EPP plans over the pipeline, reduced over the
// world, equal the loss one process computes on the same documents, and evaluating changes
// nothing of training.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/reference_run.h"
#include "common/synth_corpus.h"
#include "data/run_datasets.h"
#include "data/synth.h"
#include "dist_test_util.h"
#include "dist_train_fixture.h"
#include "runtime/train.h"

namespace infinipipe::runtime {
namespace {

class DistEval : public disttest_fixture::DistTrainFixture {
 protected:
  // 8 layers on documents of up to 1024 tokens under an 18 MiB budget: EPP slices the long
  // documents and packs the short ones (the test checks the plan it ran).
  TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const override {
    TrainOptions o = options_base(pp, dp, schedule, iters, Optimizer::adamw, false);
    Config& c = o.config;
    c.model.num_layers = 8;
    c.model.seq_length = 1024;
    c.training.global_batch_size = 16;
    c.training.data_path = (dir_ / "long").string();
    c.training.split = "80,20,0";
    c.training.eval_iters = 1;
    c.training.memory_budget = 18 << 20;
    c.parallel.recompute_granularity = RecomputeGranularity::adaptive;
    c.validate();
    return o;
  }

  // Web-like lengths (median 768, a long tail cut at 1024): long documents and short ones.
  void corpus_write() { corpus_write_shared("long", "commoncrawl", 200, 1024, 5); }

  // The sequences of evaluation `index` of the validation split, as the trainer reads them.
  std::vector<std::vector<int32_t>> eval_sequences(const Config& c, int64_t index) const {
    const TrainingConfig& t = c.training;
    const data::RunDatasets rd = data::RunDatasets::open({t.data_path, t.split, "", "", ""});
    data::DocumentStream s =
        rd.stream(data::DataSplit::valid, t.global_batch_size, static_cast<uint64_t>(t.seed));
    s.set_consumed_samples(index * t.eval_iters * t.global_batch_size);
    std::vector<std::vector<int32_t>> seqs;
    for (int64_t b = 0; b < t.eval_iters; ++b) {
      for (const data::DocumentRef& r : s.next()) {
        std::vector<int32_t> tokens =
            rd.document_tokens(data::DataSplit::valid, r, c.model.seq_length);
        if (!tokens.empty()) seqs.push_back(std::move(tokens));
      }
    }
    return seqs;
  }
};

bool sliced_and_packed(const plan::Plan& p, bool& sliced, bool& packed) {
  for (const plan::Chunk& c : p.chunks) {
    packed = packed || c.slices.size() > 1;
    for (const plan::Slice& s : c.slices) sliced = sliced || !s.is_whole();
  }
  return sliced && packed;
}

TEST_F(DistEval, Pp2Dp2ValidLossMatchesOneProcess) {
  DIST_TEST_RANKS(4);
  corpus_write();
  Comm& comm = disttest::test_comm();
  Trainer ref(options(1, 1, Schedule::epp, 3));
  ProcessGroups groups(comm, 2, 2);
  TrainOptions o = options(2, 2, Schedule::epp, 3);
  o.groups = &groups;
  Trainer t(o);
  ASSERT_TRUE(t.evaluates(data::DataSplit::valid));
  ASSERT_FALSE(t.evaluates(data::DataSplit::test));

  // Before training: the loss of the initial weights, each sequence whole in one engine.
  const std::vector<std::vector<int32_t>> seqs = eval_sequences(o.config, 0);
  const testing::LossGrads whole =
      testing::reference_run(o.config.model, seqs, static_cast<uint64_t>(o.config.training.seed));
  int64_t predicted = 0;
  for (const auto& s : seqs) predicted += static_cast<int64_t>(s.size()) - 1;
  const Trainer::EvalResult first = t.evaluate(data::DataSplit::valid, 0);
  EXPECT_EQ(first.tokens, predicted);
  EXPECT_NEAR(first.loss, whole.loss, 1e-5 * whole.loss) << "pp 2 dp 2 against whole sequences";

  // The pipeline's first stage planned its replica's share: EPP sliced and packed.
  bool sliced = false, packed = false;
  if (groups.layout().stage == 0) sliced_and_packed(t.last_eval_plan(), sliced, packed);
  int64_t flags[2] = {sliced, packed};
  MPI_Allreduce(MPI_IN_PLACE, flags, 2, MPI_INT64_T, MPI_MAX, comm.world());
  EXPECT_TRUE(flags[0]) << "no replica's evaluation plan sliced a sequence";
  EXPECT_TRUE(flags[1]) << "no replica's evaluation plan packed sequences";
  EXPECT_TRUE(t.last_eval_plan().forward_only);

  // After two iterations: the next evaluation equals the one-process trainer's.
  for (int i = 0; i < 2; ++i) {
    const double want = ref.step().loss;
    EXPECT_NEAR(t.step().loss, want, 1e-5 * want) << "training, iteration " << i + 1;
  }
  const Trainer::EvalResult a = t.evaluate(data::DataSplit::valid, 1);
  const Trainer::EvalResult b = ref.evaluate(data::DataSplit::valid, 1);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_NEAR(a.loss, b.loss, 1e-5 * b.loss) << "pp 2 dp 2 against one process after training";
  EXPECT_NE(a.loss, first.loss) << "the weights changed, so must the loss";
}

// Evaluating between iterations changes no loss, weight or data position of training, bit for
// bit (the same layout, the same plans).
TEST_F(DistEval, Pp2Dp2EvaluationLeavesTrainingBitIdentical) {
  DIST_TEST_RANKS(4);
  corpus_write();
  ProcessGroups groups(disttest::test_comm(), 2, 2);
  TrainOptions o = options(2, 2, Schedule::epp, 3);
  o.groups = &groups;
  Trainer plain(o);
  Trainer evaluated(o);
  for (int i = 0; i < 3; ++i) {
    const obs::IterationMetrics a = plain.step();
    const obs::IterationMetrics b = evaluated.step();
    EXPECT_EQ(a.loss, b.loss) << "iteration " << i + 1;
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "iteration " << i + 1;
    EXPECT_EQ(a.consumed_samples, b.consumed_samples);
    evaluated.evaluate(data::DataSplit::valid, i);
  }
  const std::vector<ParamRef> pa = plain.params(), pb = evaluated.params();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(std::memcmp(pa[i].value, pb[i].value, pa[i].numel * sizeof(float)), 0)
        << "weights of " << pa[i].name;
  }
}

}  // namespace
}  // namespace infinipipe::runtime
