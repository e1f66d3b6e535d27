// The paper's ablations as planner switches: without balanced chunking (--epp-uniform-slicing),
// without adaptive recompute (--recompute-granularity none, or full with a static count), full
// recompute (--recompute-granularity full). Each changes the EPP plan as it says.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "core/error.h"
#include "plan/budget_error.h"
#include "plan/planner.h"
#include "plan/sequence_processor.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

Config ablation_config() {
  Config cfg = testing::small_config(4, 1, 8);
  cfg.model.seq_length = 16384;
  cfg.parallel.min_tail_slice = 64;
  return cfg;
}

const std::vector<int64_t> kBatch = {16384, 9000, 3000, 2000, 700, 500, 300, 200, 120, 64};

// Lengths of each cut sequence's slices, in order.
std::map<int32_t, std::vector<int64_t>> slices_per_sequence(const std::vector<Chunk>& chunks) {
  std::map<int32_t, std::vector<int64_t>> out;
  for (const Chunk& c : chunks)
    for (const Slice& s : c.slices)
      if (s.len < s.seq_len) out[s.seq].push_back(s.len);
  return out;
}

TEST(Ablation, UniformSlicingCutsByTokensWhereBalancedCutsByCost) {
  const Config cfg = ablation_config();
  const auto cm = cost::CostModel::from_config(cfg);
  const cost::StageShape st = processor_reference_stage(cfg.model, 4);
  const ProcessorResult uniform = sequence_process(kBatch, 4, cm, st, 64, true);
  const ProcessorResult balanced = sequence_process(kBatch, 4, cm, st, 64, false);
  const auto u = slices_per_sequence(uniform.chunks), b = slices_per_sequence(balanced.chunks);
  ASSERT_EQ(u.at(0), (std::vector<int64_t>{4096, 4096, 4096, 4096}));
  // The 9000-token sequence in slices of at most 4096 equal tokens: 3000 each.
  EXPECT_EQ(u.at(1), (std::vector<int64_t>{3000, 3000, 3000}));
  // Balanced: equal cost, so later slices (longer context) are shorter.
  ASSERT_EQ(b.at(0).size(), 4u);
  EXPECT_GT(b.at(0).front(), b.at(0).back() + 1000);
  EXPECT_EQ(uniform.slices_of_longest, 4);
}

TEST(Ablation, SequenceSplitUniformIsEqualAndKeepsTheTail) {
  const auto s = sequence_split_uniform(3, 10, 4, 1);  // ceil(10/4) = 3 slices: 4, 3, 3
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].len, 4);
  EXPECT_EQ(s[1].offset, 4);
  EXPECT_EQ(s[2].len, 3);
  EXPECT_EQ(s[2].end(), 10);
  EXPECT_THROW(sequence_split_uniform(0, 10, 0, 1), Error);
}

TEST(Ablation, PlannerHonoursUniformSlicing) {
  Config cfg = ablation_config();
  cfg.parallel.epp_uniform_slicing = true;
  const auto cm = cost::CostModel::from_config(cfg);
  const PlanResult r = make_plan_detailed(cfg, cm, kBatch, Schedule::epp);
  EXPECT_TRUE(r.knobs.uniform_slicing);
  EXPECT_NE(r.knobs.describe().find("uniform slicing"), std::string::npos);
  const auto cut = slices_per_sequence(r.plan.chunks);
  ASSERT_FALSE(cut.empty()) << "the plan cut no sequence: " << r.knobs.describe();
  for (const auto& [seq, lens] : cut) {
    const auto [lo, hi] = std::minmax_element(lens.begin(), lens.end());
    EXPECT_LE(*hi - *lo, 1) << "sequence " << seq;
  }
}

std::set<int32_t> backward_recompute_counts(const Plan& p) {
  std::set<int32_t> out;
  for (const auto& list : p.actions)
    for (const Action& a : list)
      if (a.kind == ActionKind::backward) out.insert(a.recompute_layers);
  return out;
}

// none: nothing recomputed; full: every layer of every stage for every chunk; adaptive at a
// budget between its least and the no-recompute peak: some layers, not a single static count.
TEST(Ablation, RecomputeSwitchesChangeTheEppPlanAsStated) {
  Config cfg = ablation_config();
  const auto cm = cost::CostModel::from_config(cfg);
  cfg.parallel.recompute_granularity = RecomputeGranularity::none;
  const Plan none = make_plan(cfg, cm, kBatch);
  EXPECT_EQ(backward_recompute_counts(none), (std::set<int32_t>{0}));
  const int64_t none_peak =
      *std::max_element(none.predicted_peak_bytes.begin(), none.predicted_peak_bytes.end());

  cfg.parallel.recompute_granularity = RecomputeGranularity::full;
  const Plan full = make_plan(cfg, cm, kBatch);
  for (const auto& list : full.actions)
    for (const Action& a : list)
      EXPECT_EQ(a.recompute_layers, full.stages[a.stage].num_layers);

  cfg.parallel.recompute_granularity = RecomputeGranularity::adaptive;
  cfg.training.memory_budget = 1;
  int64_t least = 0;
  try {
    make_plan(cfg, cm, kBatch);
  } catch (const BudgetError& e) {
    least = e.least_budget();
  }
  ASSERT_GT(least, 0);
  ASSERT_LT(least, none_peak);
  cfg.training.memory_budget = (least + none_peak) / 2;
  const Plan adaptive = make_plan(cfg, cm, kBatch);
  const std::set<int32_t> counts = backward_recompute_counts(adaptive);
  EXPECT_GT(*counts.rbegin(), 0);
  EXPECT_GT(counts.size(), 1u) << "adaptive recompute chose one static count everywhere";
}

}  // namespace
}  // namespace infinipipe::plan
