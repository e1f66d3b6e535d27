// The K/V-cached decoder and the generation loop against the training forward: the cached,
// incremental logits equal the full-sequence forward the trainer runs (StageEngine), greedy
// decoding is its argmax at every step, and the sampling options keep their promises.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include "common/error_text.h"
#include "common/random_tokens.h"
#include "common/tensor_close.h"
#include "common/tiny_model.h"
#include "core/error.h"
#include "model/engine.h"
#include "model/generate.h"
#include "model/kernels.h"
#include "model/kv_decoder.h"
#include "model/matmul.h"

namespace infinipipe {

using namespace infinipipe::testing;

namespace {

constexpr uint64_t kGenerateSeed = 11;

ModelConfig generate_tiny_config() {
  return tiny_model_config(3, 300);  // more than one 256-key attention block
}

// The trainer's forward of the whole sequence: StageEngine runs every layer (the same weights
// from the same seed), then the final norm and the LM head give the logits (T, V).
std::vector<float> training_forward_logits(const ModelConfig& cfg, ModelParams& whole,
                                           const std::vector<int32_t>& tokens) {
  MemoryTracker tracker;
  StageEngine layers(cfg, {0, cfg.num_layers, true, false}, kGenerateSeed, tracker);
  ChunkInput in;
  in.slices.push_back({0, 0, static_cast<int64_t>(tokens.size()), tokens});
  const ForwardOutput out = layers.forward(in, nullptr, 0, 1.0);
  const int64_t T = static_cast<int64_t>(tokens.size()), C = cfg.hidden_size;
  std::vector<float> ln(static_cast<size_t>(T * C)), rstd(static_cast<size_t>(T));
  rmsnorm_forward(ln.data(), rstd.data(), out.activation.data(), whole.final_norm()->value.data(),
                  T, C, static_cast<float>(cfg.norm_epsilon));
  std::vector<float> logits(static_cast<size_t>(T * cfg.vocab_size));
  matmul_forward(logits.data(), ln.data(), whole.lm_head()->value.data(), T, C, cfg.vocab_size);
  return logits;
}

std::span<const float> row(const std::vector<float>& m, int64_t i, int64_t V) {
  return std::span<const float>(m).subspan(static_cast<size_t>(i * V), static_cast<size_t>(V));
}

class GenerateTest : public ::testing::Test {
 protected:
  ModelConfig cfg_ = generate_tiny_config();
  MemoryTracker tracker_;
  ModelParams params_{cfg_, StageRange::whole(cfg_), kGenerateSeed, tracker_};
  KvCacheDecoder decoder_{params_, tracker_, cfg_.max_positions()};
  std::vector<int32_t> prompt_ = random_tokens({9}, 36, 3)[0];

  GenerateResult run(const GenerateOptions& o) { return generate(decoder_, prompt_, o); }
};

TEST_F(GenerateTest, CachedLogitsEqualTheTrainingForwardPositionByPosition) {
  const std::vector<int32_t> seq = random_tokens({290}, 36, 7)[0];
  const int64_t V = cfg_.vocab_size;
  const std::vector<float> want = training_forward_logits(cfg_, params_, seq);
  // A prompt of 13 at once, then one token per call past the 256-key block, then 20 at once.
  std::vector<float> got = decoder_.forward(std::span(seq).first(13), true);
  for (size_t i = 13; i < 270; ++i) {
    const std::vector<float> one = decoder_.forward(std::span(seq).subspan(i, 1));
    got.insert(got.end(), one.begin(), one.end());
  }
  const std::vector<float> tail = decoder_.forward(std::span(seq).subspan(270), true);
  got.insert(got.end(), tail.begin(), tail.end());
  EXPECT_EQ(decoder_.position(), 290);
  EXPECT_TRUE(tensor_close(got, want, 1e-5));
  for (int64_t i : {0, 12, 13, 200, 255, 256, 269, 289}) {
    EXPECT_TRUE(tensor_close(row(got, i, V), row(want, i, V), 1e-5)) << "position " << i;
  }

  // The training loss (the fused classifier) from the same tokens equals the cross-entropy of
  // the cached logits.
  StageEngine engine(cfg_, StageRange::whole(cfg_), kGenerateSeed, tracker_);
  ChunkInput in;
  in.slices.push_back({0, 0, 290, seq});
  const double loss = engine.forward(in, nullptr, 0, 1.0).loss_sum;
  double ce = 0;
  for (int64_t i = 0; i + 1 < 290; ++i) {
    const std::span<const float> r = row(got, i, V);
    double m = -1e30, sum = 0;
    for (float x : r) m = std::max(m, double(x));
    for (float x : r) sum += std::exp(double(x) - m);
    ce += m + std::log(sum) - r[static_cast<size_t>(seq[static_cast<size_t>(i + 1)])];
  }
  EXPECT_NEAR(ce, loss, 1e-5 * loss);
}

TEST_F(GenerateTest, GreedyIsDeterministicAndTheArgmaxOfTheFullForwardAtEveryStep) {
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.sampling.greedy = true;
  const GenerateResult r = run(o);
  ASSERT_EQ(r.tokens.size(), 24u);
  EXPECT_EQ(r.stop, GenerateStop::max_new_tokens);
  EXPECT_EQ(run(o).tokens, r.tokens);
  std::vector<int32_t> seq = prompt_;
  for (const int32_t t : r.tokens) {
    const std::vector<float> full = training_forward_logits(cfg_, params_, seq);
    const auto last = static_cast<int64_t>(seq.size()) - 1;
    EXPECT_EQ(t, sampling_argmax(row(full, last, cfg_.vocab_size))) << "after " << seq.size();
    seq.push_back(t);
  }
  o.sampling = {false, 0.0, 0, 1.0};  // temperature 0 is greedy too
  EXPECT_EQ(run(o).tokens, r.tokens);
}

TEST_F(GenerateTest, TopKOneEqualsGreedy) {
  GenerateOptions greedy;
  greedy.max_new_tokens = 24;
  greedy.sampling.greedy = true;
  GenerateOptions top1 = greedy;
  top1.sampling = {false, 1.5, 1, 1.0};
  EXPECT_EQ(run(top1).tokens, run(greedy).tokens);
  GenerateOptions nucleus = greedy;  // a nucleus this small holds only the most likely token
  nucleus.sampling = {false, 1.0, 0, 1e-6};
  EXPECT_EQ(run(nucleus).tokens, run(greedy).tokens);
}

TEST_F(GenerateTest, AFixedSeedGivesTheSameTokensAndAnotherSeedOthers) {
  GenerateOptions o;
  o.max_new_tokens = 32;
  o.sampling = {false, 1.0, 20, 0.95};
  o.seed = 5;
  const GenerateResult a = run(o), b = run(o);
  EXPECT_EQ(a.tokens, b.tokens);
  o.seed = 6;
  EXPECT_NE(run(o).tokens, a.tokens);
  GenerateOptions greedy = o;
  greedy.sampling.greedy = true;
  EXPECT_NE(run(greedy).tokens, a.tokens) << "sampling at temperature 1 should not be argmax";
}

TEST_F(GenerateTest, WithoutTheCacheTheTokensAreTheSame) {
  GenerateOptions o;
  o.max_new_tokens = 16;
  o.sampling = {false, 0.8, 10, 0.9};
  o.seed = 3;
  const GenerateResult cached = run(o);
  o.kv_cache = false;
  EXPECT_EQ(run(o).tokens, cached.tokens);
}

TEST_F(GenerateTest, StopsAtTheEndTokenAndAtTheMaxPositions) {
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.sampling.greedy = true;
  const std::vector<int32_t> all = run(o).tokens;
  o.eos = all[5];
  const size_t first = static_cast<size_t>(std::find(all.begin(), all.end(), o.eos) - all.begin());
  const GenerateResult r = run(o);
  EXPECT_EQ(r.stop, GenerateStop::eos);
  EXPECT_EQ(r.tokens, std::vector<int32_t>(all.begin(), all.begin() + first + 1));
  // The data's end of document (SentencePieceTokenizer's <EOD>) stops it the same way.
  o.eod = o.eos;
  o.eos = -1;
  EXPECT_EQ(run(o).tokens, r.tokens);

  prompt_ = random_tokens({296}, 36, 4)[0];  // 300 positions leave room for 4 new tokens
  o.eos = o.eod = -1;
  o.max_new_tokens = 100;
  const GenerateResult full = run(o);
  EXPECT_EQ(full.stop, GenerateStop::max_positions);
  EXPECT_EQ(full.tokens.size(), 4u);
}

TEST_F(GenerateTest, BadInputsAreClearErrors) {
  GenerateOptions o;
  prompt_ = random_tokens({300}, 36, 4)[0];
  EXPECT_NE(error_text([&] { run(o); }).find("shorten the prompt to at most 299 tokens"),
            std::string::npos);
  EXPECT_THROW(run(o), ConfigError);
  prompt_.clear();
  EXPECT_NE(error_text([&] { run(o); }).find("the prompt is empty"), std::string::npos);
  prompt_ = {1, 2, 99};
  EXPECT_NE(error_text([&] { run(o); }).find("outside the model's vocabulary of 37"),
            std::string::npos);
  prompt_ = {1, 2, 3};
  o.max_new_tokens = 0;
  EXPECT_NE(error_text([&] { run(o); }).find("--max-new-tokens 0 must be ≥ 1"), std::string::npos);
  o.max_new_tokens = 4;
  o.sampling.temperature = -0.5;
  EXPECT_NE(error_text([&] { run(o); }).find("--temperature -0.5 must be"), std::string::npos);

  KvCacheDecoder small(params_, tracker_, 4);
  const std::vector<int32_t> five{1, 2, 3, 4, 5};
  EXPECT_THROW(small.forward(five), ConfigError);
  EXPECT_EQ(small.position(), 0) << "a refused forward caches nothing";
  EXPECT_THROW(KvCacheDecoder(params_, tracker_, 301), ConfigError);
  ModelParams stage(cfg_, {0, 2, true, false}, kGenerateSeed, tracker_);
  EXPECT_NE(error_text([&] { KvCacheDecoder d(stage, tracker_, 8); }).find("needs the whole model"),
            std::string::npos);
}

}  // namespace
}  // namespace infinipipe
