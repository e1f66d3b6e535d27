// The whole model through StageEngine: against an independent reference, and invariant under
// packing, slicing, recomputation and stage splits (invariant 1 of docs/architecture.md).
#include <gtest/gtest.h>

#include <cmath>

#include "common/random_tokens.h"
#include "common/tiny_model.h"
#include "core/error.h"
#include "engine_harness.h"
#include "grad_check.h"
#include "reference_model.h"

namespace infinipipe {

using namespace infinipipe::testing;

namespace {

ModelConfig tiny_config() {
  ModelConfig cfg = tiny_model_config(3, 1024);
  cfg.tie_embeddings = false;  // the model these tests were written for (Megatron-LM ties)
  return cfg;
}

const std::vector<int64_t> kLengths = {300, 41, 7, 130};

// Each sequence whole, in a chunk of its own.
std::vector<ChunkSpec> whole_chunks() {
  std::vector<ChunkSpec> c;
  for (size_t i = 0; i < kLengths.size(); ++i) c.push_back({{{int64_t(i), 0, kLengths[i]}}, 0});
  return c;
}

void expect_same(const BatchResult& a, const BatchResult& b, const char* what) {
  EXPECT_EQ(a.predicted, b.predicted) << what;
  EXPECT_NEAR(a.loss, b.loss, 1e-6 * std::abs(b.loss)) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size()) << what;
  for (const auto& [name, g] : b.grads) {
    const auto& h = a.grads.at(name);
    const double rel = rel_diff(h.data(), g.data(), int64_t(g.size()));
    EXPECT_LT(rel, 1e-5) << what << ": " << name;
  }
}

}  // namespace

TEST(Engine, MatchesReferenceModel) {
  ModelConfig cfg = tiny_config();
  const std::vector<int64_t> lengths = {40, 9, 23};
  auto seqs = random_tokens(lengths, static_cast<int32_t>(cfg.vocab_size - 1), 11);
  std::vector<ChunkSpec> chunks;
  for (size_t i = 0; i < lengths.size(); ++i) chunks.push_back({{{int64_t(i), 0, lengths[i]}}, 0});
  BatchResult res = batch_run(cfg, seqs, chunks, {StageRange::whole(cfg)}, 5);

  MemoryTracker tr;
  ModelParams params(cfg, StageRange::whole(cfg), 5, tr);
  ReferenceModel ref(cfg, params);
  const double total = 40 + 9 + 23 - 3;
  EXPECT_EQ(res.predicted, 69);
  EXPECT_NEAR(res.loss, ref.loss(seqs) / total, 1e-5);
  EXPECT_NEAR(res.loss, std::log(37.0), 0.1);  // small init: close to uniform
  // Gradients of a sample of every kind of parameter, by central differences of the reference.
  for (const char* name :
       {"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
        "model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight",
        "model.layers.2.self_attn.v_proj.weight", "model.layers.1.self_attn.o_proj.weight",
        "model.layers.2.post_attention_layernorm.weight", "model.layers.0.mlp.gate_proj.weight",
        "model.layers.1.mlp.up_proj.weight", "model.layers.2.mlp.down_proj.weight",
        "model.norm.weight", "lm_head.weight"}) {
    auto& w = ref.w.at(name);
    expect_grad_matches(
        name, res.grads.at(name), w, [&] { return ref.loss(seqs) / total; }, 1e-3, 6);
  }
}

TEST(Engine, TiedEmbeddingsMatchReference) {
  ModelConfig cfg = tiny_config();
  cfg.tie_embeddings = true;
  cfg.num_layers = 1;
  auto seqs = random_tokens({20, 12}, static_cast<int32_t>(cfg.vocab_size - 1), 12);
  BatchResult res =
      batch_run(cfg, seqs, {{{{0, 0, 20}, {1, 0, 12}}, 0}}, {StageRange::whole(cfg)}, 5);
  MemoryTracker tr;
  ModelParams params(cfg, StageRange::whole(cfg), 5, tr);
  ReferenceModel ref(cfg, params);
  EXPECT_NEAR(res.loss, ref.loss(seqs) / 30.0, 1e-5);
  EXPECT_EQ(res.grads.count("lm_head.weight"), 0u);
  expect_grad_matches(
      "tied embedding", res.grads.at("model.embed_tokens.weight"),
      ref.w.at("model.embed_tokens.weight"), [&] { return ref.loss(seqs) / 30.0; }, 1e-3, 40);
}

TEST(Engine, InvariantUnderPackingSlicingAndRecompute) {
  ModelConfig cfg = tiny_config();
  auto seqs = random_tokens(kLengths, static_cast<int32_t>(cfg.vocab_size - 1), 21);
  const std::vector<StageRange> one = {StageRange::whole(cfg)};
  const BatchResult base = batch_run(cfg, seqs, whole_chunks(), one, 9);
  EXPECT_EQ(base.predicted, 300 + 41 + 7 + 130 - 4);

  // Everything packed into one chunk.
  expect_same(
      batch_run(cfg, seqs, {{{{0, 0, 300}, {1, 0, 41}, {2, 0, 7}, {3, 0, 130}}, 0}}, one, 9), base,
      "packed");
  // Slices of unequal lengths; a tail slice shares a chunk with short sequences (hybrid).
  const std::vector<ChunkSpec> sliced = {{{{0, 0, 37}}, 0},
                                         {{{0, 37, 100}}, 0},
                                         {{{3, 0, 64}}, 0},
                                         {{{0, 137, 13}}, 0},
                                         {{{0, 150, 150}, {1, 0, 41}}, 0},
                                         {{{3, 64, 66}, {2, 0, 7}}, 0}};
  expect_same(batch_run(cfg, seqs, sliced, one, 9), base, "sliced");
  // Eight slices of one sequence.
  std::vector<ChunkSpec> eight;
  int64_t off = 0;
  for (int64_t len : {5, 60, 1, 40, 90, 30, 3, 71}) {
    eight.push_back({{{0, off, len}}, 0});
    off += len;
  }
  eight.push_back({{{1, 0, 41}, {2, 0, 7}, {3, 0, 130}}, 0});
  expect_same(batch_run(cfg, seqs, eight, one, 9), base, "eight slices");
  // Any number of layers recomputed, differing per chunk.
  for (int64_t r = 1; r <= cfg.num_layers; ++r) {
    std::vector<ChunkSpec> rc = sliced;
    for (size_t i = 0; i < rc.size(); ++i)
      rc[i].recompute = (r + int64_t(i)) % (cfg.num_layers + 1);
    expect_same(batch_run(cfg, seqs, rc, one, 9), base, "recompute");
  }
  // A 1F1B-like order: backwards interleaved with forwards, slices still reversed.
  std::vector<Action> order = {{0, true},  {1, true},  {2, true},  {3, true},
                               {4, true},  {4, false}, {5, true},  {5, false},
                               {3, false}, {2, false}, {1, false}, {0, false}};
  expect_same(batch_run(cfg, seqs, sliced, one, 9, order), base, "interleaved order");
}

TEST(Engine, StageSplitEqualsSingleStage) {
  ModelConfig cfg = tiny_config();
  auto seqs = random_tokens(kLengths, static_cast<int32_t>(cfg.vocab_size - 1), 31);
  const BatchResult base = batch_run(cfg, seqs, whole_chunks(), {StageRange::whole(cfg)}, 4);
  const std::vector<ChunkSpec> sliced = {
      {{{0, 0, 120}}, 1}, {{{0, 120, 180}, {2, 0, 7}}, 2}, {{{1, 0, 41}, {3, 0, 130}}, 0}};
  for (int64_t k = 0; k <= cfg.num_layers; ++k) {
    const std::vector<StageRange> two = {{0, k, true, false}, {k, cfg.num_layers - k, false, true}};
    expect_same(batch_run(cfg, seqs, sliced, two, 4), base, "two stages");
  }
  const std::vector<StageRange> three = {
      {0, 1, true, false}, {1, 1, false, false}, {2, 1, false, true}};
  expect_same(batch_run(cfg, seqs, sliced, three, 4), base, "three stages");
  // Tied embeddings split over stages: the two copies' grads sum to the single-stage grad.
  cfg.tie_embeddings = true;
  const BatchResult tied = batch_run(cfg, seqs, whole_chunks(), {StageRange::whole(cfg)}, 4);
  expect_same(batch_run(cfg, seqs, sliced, {{0, 2, true, false}, {2, 1, false, true}}, 4), tied,
              "tied two stages");
}

TEST(Engine, StashMatchesBreakdownAndIsFreed) {
  ModelConfig cfg = tiny_config();
  auto seqs = random_tokens({200, 50}, static_cast<int32_t>(cfg.vocab_size - 1), 41);
  const StashBreakdown b = StageEngine::stash_breakdown(cfg);
  const int64_t L = cfg.num_layers;
  MemoryTracker tr;
  StageEngine e(cfg, StageRange::whole(cfg), 1, tr);
  const double scale = 1.0 / 248.0;
  // A non-final slice with 1 recomputed layer keeps K/V for every layer.
  ChunkInput c0 = chunk_make(0, {{{0, 0, 120}}, 1}, seqs);
  e.forward(c0, nullptr, 1, scale);
  EXPECT_EQ(e.stash_bytes(0), 120 * (b.recompute_per_token_layer + b.kv_per_token_layer +
                                     (L - 1) * (b.full_per_token_layer + b.kv_per_token_layer) +
                                     b.head_per_token + b.index_per_token));
  // Final slices: recomputed layers keep only their input.
  ChunkInput c1 = chunk_make(1, {{{0, 120, 80}, {1, 0, 50}}, 2}, seqs);
  e.forward(c1, nullptr, 2, scale);
  EXPECT_EQ(e.stash_bytes(1), 130 * (2 * b.recompute_per_token_layer +
                                     (L - 2) * (b.full_per_token_layer + b.kv_per_token_layer) +
                                     b.head_per_token + b.index_per_token));
  EXPECT_EQ(tr.current(MemCategory::mem_activations), e.stash_bytes(0) + e.stash_bytes(1));
  EXPECT_EQ(tr.current(MemCategory::mem_workspace), 0);
  const int64_t before = e.stash_bytes(0);
  e.backward(1, nullptr);
  // The later slice's backward sent dK/dV for every layer of the earlier slice.
  EXPECT_EQ(e.stash_bytes(0), before + 120 * L * b.kv_per_token_layer);
  EXPECT_EQ(tr.current(MemCategory::mem_workspace), 0);
  e.backward(0, nullptr);
  EXPECT_EQ(e.num_stashed_chunks(), 0u);
  EXPECT_EQ(tr.current(MemCategory::mem_activations), 0);
  EXPECT_EQ(tr.current(MemCategory::mem_workspace), 0);
  EXPECT_EQ(tr.current(MemCategory::mem_weights), e.params().numel() * 4);
}

TEST(Engine, OutOfOrderAndBadInputsAreClearErrors) {
  ModelConfig cfg = tiny_config();
  auto seqs = random_tokens({60, 10}, static_cast<int32_t>(cfg.vocab_size - 1), 51);
  MemoryTracker tr;
  StageEngine e(cfg, StageRange::whole(cfg), 1, tr);
  // A slice whose earlier slice did not run here.
  EXPECT_THROW(e.forward(chunk_make(0, {{{0, 20, 40}}, 0}, seqs), nullptr, 0, 0.01), Error);
  e.forward(chunk_make(1, {{{0, 0, 20}}, 0}, seqs), nullptr, 0, 0.01);
  EXPECT_THROW(e.forward(chunk_make(1, {{{1, 0, 10}}, 0}, seqs), nullptr, 0, 0.01), Error);
  e.forward(chunk_make(2, {{{0, 20, 40}}, 0}, seqs), nullptr, 0, 0.01);
  // The earlier slice's backward before the later one's.
  EXPECT_THROW(e.backward(1, nullptr), Error);
  EXPECT_THROW(e.backward(7, nullptr), Error);
  e.backward(2, nullptr);
  e.backward(1, nullptr);
  EXPECT_THROW(e.forward(chunk_make(3, {{{1, 0, 10}}, 0}, seqs), nullptr, 9, 0.01), ConfigError);
  // A non-final slice's backward before its next slice ran.
  e.forward(chunk_make(8, {{{0, 0, 20}}, 0}, seqs), nullptr, 0, 0.01);
  EXPECT_THROW(e.backward(8, nullptr), Error);
  e.forward(chunk_make(9, {{{0, 20, 40}}, 0}, seqs), nullptr, 0, 0.01);
  e.backward(9, nullptr);
  e.backward(8, nullptr);
  ChunkInput bad = chunk_make(4, {{{1, 0, 10}}, 0}, seqs);
  bad.slices[0].tokens[3] = 999;
  EXPECT_THROW(e.forward(bad, nullptr, 0, 0.01), Error);
  EXPECT_EQ(e.num_stashed_chunks(), 0u);  // a failed forward leaves nothing behind
  EXPECT_EQ(tr.current(MemCategory::mem_activations), 0);
  StageEngine mid(cfg, {1, 1, false, false}, 1, tr);
  EXPECT_THROW(mid.forward(chunk_make(5, {{{1, 0, 10}}, 0}, seqs), nullptr, 0, 0.01), Error);
  cfg.seq_length = 32;
  StageEngine short_ctx(cfg, StageRange::whole(cfg), 1, tr);
  EXPECT_THROW(short_ctx.forward(chunk_make(6, {{{0, 0, 60}}, 0}, seqs), nullptr, 0, 0.01),
               ConfigError);
}

}  // namespace infinipipe
