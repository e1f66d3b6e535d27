// StageEngine::forward_eval, the forward of the validation loss: over any slicing, packing and
// stage split it gives the loss training's forward gives for whole sequences, touches no
// gradient, and leaves nothing stashed once every sequence ran its final slice.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "common/random_tokens.h"
#include "common/tiny_model.h"
#include "core/error.h"
#include "engine_harness.h"

namespace infinipipe {

using namespace infinipipe::testing;

namespace {

ModelConfig eval_config() {
  return tiny_model_config(3, 1024);
}

const std::vector<int64_t> kEvalLengths = {300, 41, 7, 130};

// The chunks through `stages` engines with forward_eval, chunk by chunk: the loss sum and
// predicted tokens; every gradient must stay zero and nothing may stay stashed.
std::pair<double, int64_t> eval_run(const ModelConfig& cfg,
                                    const std::vector<std::vector<int32_t>>& seqs,
                                    const std::vector<ChunkSpec>& chunks,
                                    const std::vector<StageRange>& stages, uint64_t seed) {
  MemoryTracker tracker;
  std::vector<std::unique_ptr<StageEngine>> engines;
  for (const StageRange& r : stages) {
    engines.push_back(std::make_unique<StageEngine>(cfg, r, seed, tracker));
  }
  const int64_t before = tracker.current(MemCategory::mem_activations);
  double loss = 0;
  int64_t predicted = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    const ChunkInput in = chunk_make(static_cast<int32_t>(c), chunks[c], seqs);
    Tensor x;
    for (auto& e : engines) {
      ForwardOutput out = e->forward_eval(in, std::move(x));
      x = std::move(out.activation);
      loss += out.loss_sum;
      predicted += out.predicted_tokens;
    }
  }
  for (auto& e : engines) {
    EXPECT_EQ(e->num_stashed_chunks(), 0u) << "every sequence ended: nothing stays";
    for (const ParamRef& p : e->params().params()) {
      int64_t nonzero = 0;
      for (int64_t i = 0; i < p.numel; ++i) nonzero += p.grad[i] != 0.0f ? 1 : 0;
      EXPECT_EQ(nonzero, 0) << p.name << " got a gradient in evaluation";
    }
  }
  EXPECT_EQ(tracker.current(MemCategory::mem_activations), before);
  return {loss, predicted};
}

}  // namespace

TEST(EngineEval, LossEqualsTrainingForwardUnderSlicingPackingAndStages) {
  const ModelConfig cfg = eval_config();
  auto seqs = random_tokens(kEvalLengths, static_cast<int32_t>(cfg.vocab_size - 1), 21);
  std::vector<ChunkSpec> whole;
  for (size_t i = 0; i < kEvalLengths.size(); ++i) {
    whole.push_back({{{int64_t(i), 0, kEvalLengths[i]}}, 0});
  }
  const BatchResult train = batch_run(cfg, seqs, whole, {StageRange::whole(cfg)}, 9);
  const double want = train.loss * static_cast<double>(train.predicted);
  // Split slices (a sequence in five pieces), a hybrid tail with short sequences, packing.
  const std::vector<ChunkSpec> sliced = {{{{0, 0, 37}}, 0},
                                         {{{0, 37, 100}}, 0},
                                         {{{3, 0, 64}}, 0},
                                         {{{0, 137, 13}}, 0},
                                         {{{0, 150, 150}, {1, 0, 41}}, 0},
                                         {{{3, 64, 66}, {2, 0, 7}}, 0}};
  for (const auto& stages :
       {std::vector<StageRange>{StageRange::whole(cfg)},
        std::vector<StageRange>{{0, 1, true, false}, {1, 2, false, true}},
        std::vector<StageRange>{{0, 1, true, false}, {1, 1, false, false}, {2, 1, false, true}}}) {
    const auto [loss, predicted] = eval_run(cfg, seqs, sliced, stages, 9);
    EXPECT_EQ(predicted, train.predicted);
    EXPECT_NEAR(loss, want, 1e-5 * want) << stages.size() << " stages";
  }
  const auto [packed, n] =
      eval_run(cfg, seqs, {{{{0, 0, 300}, {1, 0, 41}, {2, 0, 7}, {3, 0, 130}}, 0}},
               {StageRange::whole(cfg)}, 9);
  EXPECT_EQ(n, train.predicted);
  EXPECT_NEAR(packed, want, 1e-5 * want) << "packed";
}

TEST(EngineEval, OutOfOrderSlicesAreClearErrors) {
  const ModelConfig cfg = eval_config();
  auto seqs = random_tokens({50}, static_cast<int32_t>(cfg.vocab_size - 1), 3);
  MemoryTracker tracker;
  StageEngine e(cfg, StageRange::whole(cfg), 1, tracker);
  // The second slice before the first.
  EXPECT_THROW(e.forward_eval(chunk_make(0, {{{0, 20, 30}}, 0}, seqs), Tensor()), Error);
  EXPECT_EQ(e.num_stashed_chunks(), 0u);
  e.forward_eval(chunk_make(0, {{{0, 0, 20}}, 0}, seqs), Tensor());
  EXPECT_EQ(e.num_stashed_chunks(), 1u) << "its K/V wait for the sequence's next slice";
  e.forward_eval(chunk_make(1, {{{0, 20, 30}}, 0}, seqs), Tensor());
  EXPECT_EQ(e.num_stashed_chunks(), 0u);
}

}  // namespace infinipipe
