// `generate` loads a checkpoint whatever layout wrote it: the model pp 2 × dp 2 ranks trained and
// saved gives the same text (and, to fp32 round-off, the same logits) as the one one process
// trained and saved from the same seed and data.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_model.h"
#include "comm/mpi_groups.h"
#include "common/tensor_close.h"
#include "dist_test_util.h"
#include "dist_train_fixture.h"
#include "model/generate.h"

namespace infinipipe::runtime {
namespace {

class DistGenerate : public disttest_fixture::DistTrainFixture {
 protected:
  TrainOptions options(int64_t pp, int64_t dp, Schedule schedule, int64_t iters) const override {
    return options_base(pp, dp, schedule, iters, Optimizer::adamw, false);
  }

  void train_and_save(int64_t pp, int64_t dp, const std::string& dir, ProcessGroups* groups) {
    TrainOptions o = options(pp, dp, Schedule::epp, 3);
    o.groups = groups;
    o.config.training.save = dir;
    Trainer t(o);
    run(t, 3);
    t.save();
  }
};

TEST_F(DistGenerate, ACheckpointOfPp2Dp2GivesTheTextOfOneProcess) {
  DIST_TEST_RANKS(4);
  Comm& comm = disttest::test_comm();
  const std::string one = (dir_ / "one").string(), many = (dir_ / "many").string();
  if (comm.rank() == 0) train_and_save(1, 1, one, nullptr);
  ProcessGroups groups(comm, 2, 2);
  train_and_save(2, 2, many, &groups);
  comm.barrier("both checkpoints");
  if (comm.rank() != 0) return;

  ASSERT_EQ(CheckpointReader(many).num_ranks(), 2) << "each pipeline rank wrote its shard";
  MemoryTracker tracker;
  const CheckpointModel a = checkpoint_load_model(one, tracker);
  const CheckpointModel b = checkpoint_load_model(many, tracker);
  const std::vector<int32_t> prompt{'t', 'h', 'e', ' '};
  GenerateOptions o;
  o.max_new_tokens = 40;
  o.sampling.greedy = true;
  KvCacheDecoder da(*a.params, tracker, 64), db(*b.params, tracker, 64);
  const GenerateResult ra = generate(da, prompt, o), rb = generate(db, prompt, o);
  EXPECT_EQ(rb.tokens, ra.tokens);
  da.reset();
  db.reset();
  EXPECT_TRUE(testing::tensor_close(db.forward(prompt, true), da.forward(prompt, true), 1e-5));
}

}  // namespace
}  // namespace infinipipe::runtime
