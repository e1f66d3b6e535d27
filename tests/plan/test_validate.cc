#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "plan/budget_error.h"
#include "plan/schedule.h"
#include "plan/schedule_memory.h"
#include "plan/validate.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using testing::small_config;

class Validate : public ::testing::Test {
 protected:
  Config cfg = small_config(4);
  cost::CostModel cost = cost::CostModel::from_config(cfg);
  // seq 0 cut in three slices (two split chunks, a hybrid tail with seq 1), seqs 2, 3 batched.
  Plan plan = testing::plan_from_chunks(cfg, {3000, 200, 300, 400},
                                        {{{0, 0, 1000}},
                                         {{0, 1000, 1000}},
                                         {{0, 2000, 1000}, {1, 0, 200}},
                                         {{2, 0, 300}, {3, 0, 400}}});
  void SetUp() override {
    schedule_epp(plan);
    plan_predict(plan, cost, cfg);
    ASSERT_TRUE(validate(plan, cost, cfg).ok()) << validate(plan, cost, cfg).message();
  }
  std::string errors_of(const Plan& p) {
    ValidationResult v = validate(p, cost, cfg);
    EXPECT_FALSE(v.ok()) << "the broken plan passed validation";
    return v.message();
  }
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(Validate, MissingToken) {
  plan.chunks[3].slices[1].len = 399;
  std::string e = errors_of(plan);
  EXPECT_TRUE(has(e, "tokens [399, 400) of sequence 3 are in no chunk")) << e;
}

TEST_F(Validate, MissingSliceInTheMiddle) {
  plan.chunks[1].slices[0].offset = 1001;
  plan.chunks[1].slices[0].len = 999;
  std::string e = errors_of(plan);
  EXPECT_TRUE(has(e, "tokens [1000, 1001) of sequence 0 are in no chunk")) << e;
}

TEST_F(Validate, DuplicateToken) {
  plan.chunks[1].slices[0].offset = 900;
  plan.chunks[1].slices[0].len = 1100;
  std::string e = errors_of(plan);
  EXPECT_TRUE(has(e, "tokens [900, 1000) of sequence 0 are in chunks 0 and 1 (duplicate")) << e;
}

TEST_F(Validate, ReversedSliceOrder) {
  // Chunk 0 now holds the second slice, chunk 1 the first: forwards run out of slice order.
  std::swap(plan.chunks[0].slices[0], plan.chunks[1].slices[0]);
  std::string e = errors_of(plan);
  EXPECT_TRUE(has(e,
                  "rank 0 action 1 (forward of chunk 1 on stage 0): slice [0, 1000) of "
                  "sequence 0 runs its forward after the later slice at offset 1000 (chunk 0)"))
      << e;
}

TEST_F(Validate, ReversedBackwardOrder) {
  // On the last rank, run the backwards of chunks 2 and 1 in forward (not reverse) slice order.
  auto& list = plan.actions[3];
  int b1 = -1, b2 = -1;
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].kind == ActionKind::backward) {
      if (list[i].chunk == 1) b1 = static_cast<int>(i);
      if (list[i].chunk == 2) b2 = static_cast<int>(i);
    }
  ASSERT_LT(b2, b1);
  std::swap(list[b1], list[b2]);
  std::string e = errors_of(plan);
  EXPECT_TRUE(has(e, "runs its backward after the earlier slice at offset 1000 (chunk 1)")) << e;
  EXPECT_TRUE(has(e, "rank 3 action")) << e;
}

TEST_F(Validate, BackwardBeforeForward) {
  auto& list = plan.actions[2];
  ASSERT_EQ(list[0].kind, ActionKind::forward);
  int b0 = -1;
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].kind == ActionKind::backward && list[i].chunk == 0) b0 = static_cast<int>(i);
  Action b = list[b0];
  list.erase(list.begin() + b0);
  list.insert(list.begin(), b);
  std::string e = errors_of(plan);
  EXPECT_TRUE(has(e, "rank 2 action 0: backward of chunk 0 on stage 2 comes before its forward"))
      << e;
}

TEST_F(Validate, MissingAndDuplicateActions) {
  Plan p = plan;
  p.actions[1].pop_back();
  EXPECT_TRUE(has(errors_of(p), "rank 1 has no backward of chunk")) << errors_of(p);
  Plan q = plan;
  q.actions[1].push_back(q.actions[1].front());
  EXPECT_TRUE(has(errors_of(q), "repeats the forward of chunk 0 on stage 1 (first at action 0)"));
}

TEST_F(Validate, DeadlockFromSwappedActions) {
  // 1F1B on rank 0 (pp 4) is F0 F1 F2 F3 B0 ...; swapping F2 and B0 makes rank 0 wait for the
  // gradient of chunk 0 from rank 1, which first needs chunk 2's activation from rank 0.
  Plan p = testing::plan_equal_chunks(cfg, 6);
  schedule_1f1b(p);
  auto& list = p.actions[0];
  ASSERT_EQ(list[2].kind, ActionKind::forward);
  ASSERT_EQ(list[4].kind, ActionKind::backward);
  std::swap(list[2], list[4]);
  std::string e = errors_of(p);
  EXPECT_TRUE(has(e, "the action lists deadlock")) << e;
  EXPECT_TRUE(has(e,
                  "rank 0 action 2 (backward of chunk 0 on stage 0) waits for the gradient of "
                  "chunk 0 from stage 1 (rank 1)"))
      << e;
  EXPECT_TRUE(has(e,
                  "rank 1 action 2 (forward of chunk 2 on stage 1) waits for the activation "
                  "of chunk 2 from stage 0 (rank 0)"))
      << e;
}

TEST_F(Validate, MemoryOverBudget) {
  MemoryTrace t = schedule_memory_trace(plan, cost, cfg);
  int64_t peak0 = t.peak[0];
  plan.memory_budget = peak0 - 1;
  std::string e = errors_of(plan);
  EXPECT_TRUE(has(e, "rank 0 exceeds the memory budget at action")) << e;
  EXPECT_TRUE(has(e, fmt::format("({} bytes) > budget", peak0))) << e;
  EXPECT_TRUE(has(e, fmt::format("{} bytes)", peak0 - 1))) << e;
  plan.memory_budget = peak0;
  for (int r = 1; r < 4; ++r) plan.memory_budget = std::max(plan.memory_budget, t.peak[r]);
  EXPECT_TRUE(validate(plan, cost, cfg).ok());
  plan.memory_budget = t.static_bytes[0] - 1;
  EXPECT_TRUE(has(errors_of(plan), "weights, gradients and optimizer state alone take"));
}

TEST_F(Validate, ThrowingVariantNamesThePlan) {
  plan.chunks[3].slices[1].len = 399;
  try {
    validate_or_throw(plan, cost, cfg);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "the epp plan is invalid")) << e.what();
  }
}

// Over budget and otherwise sound: a BudgetError carrying the largest peak and its rank; a
// broken structure stays a plain Error.
TEST_F(Validate, MemoryOnlyFailureIsABudgetErrorWithTheBindingRank) {
  const MemoryTrace t = schedule_memory_trace(plan, cost, cfg);
  const auto top = std::max_element(t.peak.begin(), t.peak.end());
  plan.memory_budget = *top - 1;
  try {
    validate_or_throw(plan, cost, cfg);
    FAIL() << "expected BudgetError";
  } catch (const BudgetError& e) {
    EXPECT_EQ(e.least_budget(), *top);
    EXPECT_EQ(e.rank(), top - t.peak.begin());
    EXPECT_TRUE(
        has(e.what(), fmt::format("needs at least {} on rank {}", format_bytes(*top), e.rank())))
        << e.what();
  }
  plan.chunks[3].slices[1].len = 399;
  try {
    validate_or_throw(plan, cost, cfg);
    FAIL() << "expected Error";
  } catch (const BudgetError& e) {
    FAIL() << "a broken plan is not a budget problem: " << e.what();
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "the epp plan is invalid")) << e.what();
  }
}

TEST_F(Validate, MemoryTraceFollowsTheChunksInFlight) {
  // With no recompute a forward adds activation + K/V kept; a backward frees them again.
  Plan p = testing::plan_equal_chunks(cfg, 5);
  schedule_gpipe(p);
  MemoryTrace t = schedule_memory_trace(p, cost, cfg);
  auto sh = p.chunks[0].shapes();
  for (int r = 0; r < 4; ++r) {
    auto st = stage_shape(p.stages[r]);
    int64_t act = cost.activation_bytes(sh, st, 0);
    EXPECT_EQ(t.steps[r][4].after, t.static_bytes[r] + 5 * act);  // GPipe: all 5 in flight
    EXPECT_EQ(t.steps[r].back().after, t.static_bytes[r]);        // everything freed at the end
    // The first backward, with the last forward's output still on its way (but on the last stage).
    const int64_t sent = r + 1 < 4 ? cost.p2p_bytes(sh) : 0;
    EXPECT_EQ(t.peak[r],
              t.static_bytes[r] + 5 * act + cost.backward_transient_bytes(sh, st, 0) + sent);
  }
  // Recomputing every layer keeps less.
  Plan q = p;
  for (auto& list : q.actions)
    for (Action& a : list) a.recompute_layers = static_cast<int32_t>(q.stages[a.stage].num_layers);
  MemoryTrace tq = schedule_memory_trace(q, cost, cfg);
  for (int r = 0; r < 4; ++r) EXPECT_LT(tq.steps[r][4].after, t.steps[r][4].after);
}

TEST_F(Validate, SplitSequencesHoldKvAndDkvUntilTheirEarlierSlicesFinish) {
  MemoryTrace t = schedule_memory_trace(plan, cost, cfg);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(t.steps[r].back().after, t.static_bytes[r]);
  auto st = stage_shape(plan.stages[3]);
  auto s0 = plan.chunks[0].shapes();
  // Split chunk 0 keeps its K/V beyond the activations.
  EXPECT_GT(cost.kv_keep_bytes(s0, st), 0);
  EXPECT_EQ(t.steps[3][0].after,
            t.static_bytes[3] + cost.activation_bytes(s0, st, 0) + cost.kv_keep_bytes(s0, st));
}

TEST_F(Validate, LayoutErrors) {
  Plan p = plan;
  p.stages[1].num_layers += 1;
  EXPECT_TRUE(has(errors_of(p), "stage 2 covers layers [4, 6), expected it to start at layer 5"))
      << errors_of(p);
  Plan q = plan;
  q.stages[0].has_embedding = false;
  EXPECT_TRUE(has(errors_of(q), "stage 0 lacks the embedding"));
}

}  // namespace
}  // namespace infinipipe::plan
