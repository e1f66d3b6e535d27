// EPP at pp 1 (no bubble) packs whole sequences into micro-batches larger than the longest when
// that is faster, as the batch-level tuners and the Ulysses baseline do: fewer, larger chunks pay
// the per-chunk overheads and the ZeRO-3 gathers fewer times. It is then never slower than tuned
// 1F1B on the same layout, and the plan is the same for any thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "plan/plan_explain.h"
#include "plan/plan_json.h"
#include "plan/planner.h"

namespace infinipipe::plan {
namespace {

// Llama-7B on 32 A800s as pp 1 x Ulysses 8 x dp 4 with ZeRO-3 (the Ulysses baseline's layout
// for examples/llama7b-48k.yaml): one replica's share.
Config pp1_config() {
  Config cfg;
  cfg.model.num_layers = 32;
  cfg.model.hidden_size = 4096;
  cfg.model.num_attention_heads = 32;
  cfg.model.ffn_hidden_size = 11008;
  cfg.model.vocab_size = 32000;
  cfg.model.seq_length = 49152;
  cfg.model.tie_embeddings = false;
  cfg.training.bf16 = true;
  cfg.cluster.device = "a800-80gb";
  cfg.cluster.num_devices = 32;
  cfg.cluster.devices_per_node = 8;
  cfg.parallel.pipeline_parallel = 1;
  cfg.parallel.ulysses_degree = 8;
  cfg.parallel.data_parallel = 4;
  cfg.parallel.zero_stage = 3;
  cfg.parallel.schedule = Schedule::epp;
  return cfg;
}

// A replica's share without the batch's longest sequences: lognormal body up to 28K tokens.
std::vector<int64_t> short_share(uint32_t seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> body(7.5, 1.3);
  std::vector<int64_t> out(128);
  for (auto& l : out) l = std::clamp<int64_t>(static_cast<int64_t>(body(rng)), 16, 28672);
  out[5] = 28672;
  return out;
}

int64_t largest_chunk_tokens(const Plan& p) {
  int64_t most = 0;
  for (const Chunk& c : p.chunks) {
    int64_t t = 0;
    for (const Slice& s : c.slices) t += s.len;
    most = std::max(most, t);
  }
  return most;
}

TEST(PlannerCapacity, EppAtPp1PacksLargerMicroBatchesAndMatchesTuned1f1b) {
  const Config cfg = pp1_config();
  const auto cm = cost::CostModel::from_config(cfg);
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const std::vector<int64_t> lengths = short_share(seed);
    const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
    const PlanResult epp = make_plan_detailed(cfg, cm, lengths, Schedule::epp, 1);
    const PlanResult f1b = make_plan_detailed(cfg, cm, lengths, Schedule::one_f_one_b);
    // The longest sequence's capacity leaves small chunks whose ZeRO-3 gathers show.
    EXPECT_GT(largest_chunk_tokens(epp.plan), longest);
    EXPECT_LE(epp.plan.predicted_step_time, f1b.plan.predicted_step_time);
    // The explanation names the capacity the chosen plan packed to.
    int64_t chosen_capacity = 0;
    for (const ExplainCandidate& c : epp.explain.candidates)
      if (c.chosen) chosen_capacity = c.micro_batch_tokens;
    EXPECT_GE(chosen_capacity, largest_chunk_tokens(epp.plan));
    EXPECT_GT(chosen_capacity, longest);
    const std::string want = plan_to_json(epp.plan).dump();
    EXPECT_EQ(plan_to_json(make_plan_detailed(cfg, cm, lengths, Schedule::epp, 4).plan).dump(),
              want);
  }
}

}  // namespace
}  // namespace infinipipe::plan
