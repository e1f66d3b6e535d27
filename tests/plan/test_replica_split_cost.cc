// The cost the replica split balances: the compute where a sequence's activations fit, plus the
// recompute its activations force where they do not; and the split that follows from it.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "plan/model_states.h"
#include "plan/planner.h"
#include "plan/replica_balance.h"
#include "plan/schedule_memory.h"
#include "plan/stage_layout.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

Config split_config() {
  Config cfg = testing::small_config(2);
  cfg.model.seq_length = 16384;
  return cfg;
}

// A budget under which a sequence of `fits` tokens keeps every activation on every stage and
// one of 2 × fits does not: the heaviest stage's model states, `fits` tokens' activations and
// the largest transient of its tail slice (the room ReplicaSplitCost leaves, as Eq. 14's
// grouping does).
int64_t budget_fitting(const Config& cfg, const cost::CostModel& cm, int64_t fits) {
  const MemoryContext mem = plan_memory_context(cfg, int64_t{1} << 40);
  const ReplicaSplitCost price(cfg, cm);
  const cost::SliceShape s{0, fits, false};
  const std::span<const cost::SliceShape> one(&s, 1);
  const int64_t tail_len =
      fits > price.default_limit().tokens ? std::min(fits, cfg.parallel.min_tail_slice) : fits;
  const cost::SliceShape t{fits - tail_len, tail_len, true};
  const std::span<const cost::SliceShape> tail(&t, 1);
  int64_t need = 0;
  for (const StageSpec& st : stage_layout_planned(cfg, cm, 2, 1)) {
    const cost::StageShape sh = stage_shape(st);
    const int64_t transient = std::max(
        cm.backward_transient_bytes(tail, sh, sh.num_layers) + cm.dkv_buffer_bytes(tail, sh),
        cm.forward_transient_bytes(tail, sh));
    need = std::max(need, stage_static_bytes(cm, sh, mem) + cm.activation_bytes(one, sh, 0) +
                              cm.kv_keep_bytes(one, sh) + transient);
  }
  return need;
}

TEST(ReplicaSplitCost, IsTheComputeWhereActivationsFit) {
  Config cfg = split_config();
  cfg.training.memory_budget = int64_t{1} << 40;
  const auto cm = cost::CostModel::from_config(cfg);
  const ReplicaSplitCost cost(cfg, cm);
  for (int64_t l : {1, 100, 4096, 16384}) {
    EXPECT_EQ(cost.recompute(l), 0) << l;
    EXPECT_DOUBLE_EQ(cost(l), cost.work(l, cost.default_limit())) << l;
  }
  EXPECT_EQ(cost(0), 0);
}

TEST(ReplicaSplitCost, ChargesRecomputeOnlyPastTheBudgetAndAtMostAllOfIt) {
  Config cfg = split_config();
  const auto probe = cost::CostModel::from_config(cfg);
  cfg.training.memory_budget = budget_fitting(cfg, probe, 4096);
  const auto cm = cost::CostModel::from_config(cfg);
  const ReplicaSplitCost cost(cfg, cm);
  EXPECT_EQ(cost.recompute(4096), 0);
  EXPECT_EQ(cost.recompute(1000), 0);
  const cost::SliceShape whole{0, 16384, false};
  const double all = cm.recompute_time(std::span<const cost::SliceShape>(&whole, 1),
                                       cfg.model.num_layers);
  EXPECT_GT(cost.recompute(16384), 0);
  EXPECT_LE(cost.recompute(16384), all * (1 + 1e-12));
  double last = 0;
  for (int64_t l = 4096; l <= 16384; l += 1024) {
    EXPECT_GE(cost.recompute(l), last) << l;  // more tokens never need less recompute
    last = cost.recompute(l);
    EXPECT_DOUBLE_EQ(cost(l), cost.work(l, cost.default_limit()) + cost.recompute(l));
  }
}

// The trainer forces its layer split, virtual stages included: a rank holding stages 0 and 2 of
// 2 layers each weighs like one holding a stage of 4.
TEST(ReplicaSplitCost, AForcedSplitOfVirtualStagesCountsEachRanksLayersOnce) {
  Config flat = split_config();
  flat.parallel.stage_layers = {4, 4};
  const auto cm = cost::CostModel::from_config(flat);
  flat.training.memory_budget = budget_fitting(flat, cm, 4096);
  Config virt = flat;
  virt.parallel.stage_layers = {2, 2, 2, 2};
  const ReplicaSplitCost a(flat, cm), b(virt, cm);
  EXPECT_GT(a.recompute(16384), 0);
  for (int64_t l : {4096, 8192, 16384}) EXPECT_DOUBLE_EQ(a.recompute(l), b.recompute(l)) << l;
}

// One long sequence and many short ones over two replicas: where the long one must recompute,
// its replica gets fewer of the short ones, and the split still keeps every sequence once with
// the replicas' prices within the costliest sequence's of each other (LPT's bound).
TEST(BalanceReplicas, GivesARecomputingSequenceLessCompanyAndKeepsEverySequence) {
  std::vector<int64_t> lengths = {16384};
  for (int i = 0; i < 200; ++i) lengths.push_back(1024 + 97 * (i % 13));
  auto short_tokens_beside_longest = [&](const Config& cfg) {
    const auto cm = cost::CostModel::from_config(cfg);
    const auto parts = balance_replicas(lengths, 2, cm, cfg);
    const ReplicaSplitCost cost(cfg, cm);
    std::vector<int64_t> all;
    double lo = 1e30, hi = 0;
    int64_t beside = -1;
    for (const auto& p : parts) {
      int64_t tokens = 0;
      for (int64_t l : p) {
        all.push_back(l);
        if (l != 16384) tokens += l;
      }
      if (std::find(p.begin(), p.end(), 16384) != p.end()) beside = tokens;
      lo = std::min(lo, cost.share(p));
      hi = std::max(hi, cost.share(p));
    }
    const int64_t longest[] = {16384};
    EXPECT_LE(hi - lo, cost.share(longest));
    auto sorted = lengths;
    std::sort(sorted.begin(), sorted.end());
    std::sort(all.begin(), all.end());
    EXPECT_EQ(all, sorted);
    return beside;
  };
  Config roomy = split_config();
  roomy.training.memory_budget = int64_t{1} << 40;
  Config tight = split_config();
  tight.training.memory_budget =
      budget_fitting(tight, cost::CostModel::from_config(tight), 4096);
  const int64_t tight_company = short_tokens_beside_longest(tight);
  const int64_t roomy_company = short_tokens_beside_longest(roomy);
  EXPECT_GT(roomy_company, 0) << "the long sequence must get company when it fits";
  EXPECT_LT(tight_company, roomy_company);
}

}  // namespace
}  // namespace infinipipe::plan
