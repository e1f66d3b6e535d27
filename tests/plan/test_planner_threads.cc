// The EPP search evaluates its candidates on several threads: the plan, the search's record and
// the knobs are the same, byte for byte, for any thread count, on batches whose plans have
// slices, hybrid and packed chunks, several pipelines and recompute.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "common/paper_llama.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/test_plan_util.h"

namespace infinipipe::plan {
namespace {

// Llama-30B at 96K on A800s, Ulysses 8 (examples/llama30b-96k.yaml): memory binds at pp 4.
Config big_config(int64_t pp) {
  return infinipipe::testing::paper_llama(pp, true);
}

std::string record_of(const PlanResult& r) {
  std::string s = plan_to_json(r.plan).dump() + "\n" + r.knobs.describe() + "\n" +
                  std::to_string(r.knobs.candidates) + "\n";
  for (const std::string& n : r.explain.notes) s += n + "\n";
  s += std::to_string(r.explain.candidates.size());
  return s;
}

TEST(PlannerThreads, SamePlanForAnyThreadCount) {
  std::mt19937 rng(7);
  bool split = false, hybrid = false, batched = false, pipelines = false, recompute = false;
  // A budget below the device's (60 GB of 80 GiB) makes the solve-charged grouping cut.
  const struct {
    int64_t pp;
    int n;
    int64_t budget;  // 0: the device's memory
  } cases[] = {{4, 160, 0}, {4, 320, 0}, {8, 200, 0}, {4, 200, 60'000'000'000}};
  for (const auto& c : cases) {
    Config cfg = big_config(c.pp);
    cfg.training.memory_budget = c.budget;
    const auto cm = cost::CostModel::from_config(cfg);
    const auto lengths = testing::long_tail_lengths(rng, c.n, cfg.model.seq_length);
    const PlanResult one = make_plan_detailed(cfg, cm, lengths, Schedule::epp, 1);
    for (const Chunk& ch : one.plan.chunks) {
      split = split || ch.kind() == ChunkKind::split;
      hybrid = hybrid || ch.kind() == ChunkKind::hybrid;
      batched = batched || ch.kind() == ChunkKind::batched;
    }
    pipelines = pipelines || one.plan.num_pipelines() > 1;
    for (const auto& list : one.plan.actions)
      for (const Action& a : list) recompute = recompute || a.recompute_layers > 0;
    const std::string want = record_of(one);
    for (int32_t threads : {2, 3, 8}) {
      SCOPED_TRACE(::testing::Message()
                   << "pp " << c.pp << ", " << c.n << " sequences, " << threads << " threads");
      EXPECT_EQ(record_of(make_plan_detailed(cfg, cm, lengths, Schedule::epp, threads)), want);
    }
  }
  // The batches exercise what the search decides (else this test would prove little).
  EXPECT_TRUE(split);
  EXPECT_TRUE(hybrid);
  EXPECT_TRUE(batched);
  EXPECT_TRUE(pipelines);
  EXPECT_TRUE(recompute);
}

}  // namespace
}  // namespace infinipipe::plan
