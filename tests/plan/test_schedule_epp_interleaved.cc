// EPP on virtual stages (schedule_epp with vpp > 1): with whole sequences it is Megatron-LM's
// interleaved 1F1B action for action; with slices, packed and hybrid chunks and several
// pipelines every plan validates (slice order on every virtual stage, no deadlock), the memory
// trace follows the chunks in flight per virtual stage, and interleaving shrinks the bubble as it
// does for whole sequences.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <unordered_map>

#include "plan/schedule.h"
#include "plan/schedule_memory.h"
#include "plan/schedule_replay.h"
#include "plan/validate.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

using testing::plan_equal_chunks;
using testing::plan_from_chunks;
using testing::plan_random;
using testing::set_uniform_times;
using testing::small_config;

// Random pipeline groups: cuts only between chunks no cut sequence spans.
void random_pipelines(Plan& p, std::mt19937& rng) {
  const size_t m = p.chunks.size();
  std::unordered_map<int32_t, size_t> last_of_seq;
  for (size_t c = 0; c < m; ++c)
    for (const Slice& s : p.chunks[c].slices)
      if (!s.is_whole()) last_of_seq[s.seq] = c;
  std::vector<bool> open_after(m, false);  // a cut sequence continues past chunk c
  for (size_t c = 0; c < m; ++c)
    for (const Slice& s : p.chunks[c].slices)
      if (!s.is_whole() && last_of_seq[s.seq] > c)
        for (size_t d = c; d < last_of_seq[s.seq]; ++d) open_after[d] = true;
  std::bernoulli_distribution cut(0.25);
  int32_t g = 0;
  for (size_t c = 0; c < m; ++c) {
    p.pipeline_of_chunk[c] = g;
    if (!open_after[c] && cut(rng)) ++g;
  }
}

TEST(EppInterleaved, WholeSequencesAreMegatronsInterleavedOrder) {
  for (int pp : {2, 4})
    for (int vpp : {2, 3})
      for (int m : {pp, pp + 1, 2 * pp, 2 * pp + 3, 3 * pp, 5 * pp - 1}) {
        Config cfg = small_config(pp, vpp, pp * vpp);
        Plan mega = plan_equal_chunks(cfg, m), epp = mega;
        schedule_interleaved(mega);
        schedule_epp(epp);
        ASSERT_EQ(epp.actions.size(), mega.actions.size());
        for (int r = 0; r < pp; ++r) {
          ASSERT_EQ(epp.actions[r].size(), mega.actions[r].size());
          for (size_t i = 0; i < epp.actions[r].size(); ++i) {
            const Action &a = epp.actions[r][i], &b = mega.actions[r][i];
            EXPECT_TRUE(a.kind == b.kind && a.chunk == b.chunk && a.stage == b.stage)
                << "pp " << pp << " vpp " << vpp << " m " << m << " rank " << r << " action "
                << i;
          }
        }
      }
}

// Slices, hybrid and packed chunks, several pipelines, pp 2..4, vpp 2..3: every plan passes the
// validator (one forward and backward per (stage, chunk), slice order on every virtual stage,
// no deadlock in the blocking replay), and the random batches do reach cut sequences and
// several pipelines.
TEST(EppInterleaved, RandomSlicedWorkloadsValidate) {
  std::mt19937 rng(2509);
  int with_cuts = 0, with_pipelines = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int pp = 2 + trial % 3, vpp = 2 + (trial / 3) % 2;
    Config cfg = small_config(pp, vpp, pp * vpp * 2);
    Plan p = plan_random(cfg, rng, 3 + trial % 17);
    random_pipelines(p, rng);
    schedule_epp(p);
    EXPECT_EQ(p.schedule, "epp");
    const ValidationResult v = validate_structure(p, cfg);
    ASSERT_TRUE(v.ok()) << "trial " << trial << " pp " << pp << " vpp " << vpp << ": "
                        << v.message();
    for (int r = 0; r < pp; ++r)
      EXPECT_EQ(p.actions[r].size(), 2 * p.chunks.size() * size_t(vpp)) << "trial " << trial;
    bool cut = false;
    for (const Chunk& c : p.chunks) cut = cut || c.kind() == ChunkKind::split;
    with_cuts += cut;
    with_pipelines += p.num_pipelines() > 1 && cut;
  }
  EXPECT_GT(with_cuts, 30);
  EXPECT_GT(with_pipelines, 10);
}

// One sequence cut into K slices on pp 4: every virtual stage runs the forwards in slice order
// and the backwards in reverse (checked here directly, not only through validate()).
TEST(EppInterleaved, SlicesKeepTheirOrderOnEveryVirtualStage) {
  for (int vpp : {2, 4})
    for (int k : {2, 3, 5, 8}) {
      Config cfg = small_config(4, vpp, 4 * vpp);
      const int64_t len = 1000 * k;
      std::vector<std::vector<testing::SliceSpec>> chunks;
      for (int j = 0; j < k; ++j) chunks.push_back({{0, 1000 * j, 1000}});
      chunks.push_back({{1, 0, 300}, {2, 0, 200}});
      Plan p = plan_from_chunks(cfg, {len, 300, 200}, chunks);
      schedule_epp(p);
      for (int s = 0; s < p.num_stages(); ++s) {
        std::vector<int32_t> f, b;
        for (const Action& a : p.actions[s % 4])
          if (a.stage == s && a.chunk < k) (a.kind == ActionKind::forward ? f : b).push_back(a.chunk);
        ASSERT_EQ(f.size(), size_t(k));
        ASSERT_EQ(b.size(), size_t(k));
        for (int j = 0; j < k; ++j) {
          EXPECT_EQ(f[j], j) << "vpp " << vpp << " K " << k << " stage " << s;
          EXPECT_EQ(b[j], k - 1 - j) << "vpp " << vpp << " K " << k << " stage " << s;
        }
      }
      EXPECT_TRUE(validate_structure(p, cfg).ok());
    }
}

// validate() proves the order on virtual stages: two backwards of one sequence's slices swapped
// on a rank's second virtual stage are refused as reversed slice order, and two forwards swapped
// across the virtual stages of one rank as a deadlock.
TEST(EppInterleaved, ValidateRefusesBrokenOrdersOnVirtualStages) {
  Config cfg = small_config(2, 2, 4);
  std::vector<std::vector<testing::SliceSpec>> chunks{
      {{0, 0, 1000}}, {{0, 1000, 1000}}, {{0, 2000, 500}, {1, 0, 300}}, {{2, 0, 400}}};
  Plan good = plan_from_chunks(cfg, {2500, 300, 400}, chunks);
  schedule_epp(good);
  ASSERT_TRUE(validate_structure(good, cfg).ok());

  Plan reversed = good;  // rank 1's backwards of chunks 1 and 2 on stage 3 (its second stage)
  auto& list = reversed.actions[1];
  auto find = [&](ActionKind k, int32_t chunk, int32_t stage) {
    return std::find_if(list.begin(), list.end(), [&](const Action& a) {
      return a.kind == k && a.chunk == chunk && a.stage == stage;
    });
  };
  std::iter_swap(find(ActionKind::backward, 1, 3), find(ActionKind::backward, 2, 3));
  const ValidationResult v = validate_structure(reversed, cfg);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.message().find("backwards in reverse"), std::string::npos) << v.message();
  EXPECT_NE(v.message().find("on stage 3"), std::string::npos) << v.message();

  Plan stuck = good;  // rank 0 runs chunk 3's forward on stage 2 before the one on stage 0
  auto& l0 = stuck.actions[0];
  auto f00 = std::find_if(l0.begin(), l0.end(), [](const Action& a) {
    return a.kind == ActionKind::forward && a.chunk == 3 && a.stage == 0;
  });
  auto f02 = std::find_if(l0.begin(), l0.end(), [](const Action& a) {
    return a.kind == ActionKind::forward && a.chunk == 3 && a.stage == 2;
  });
  std::iter_swap(f00, f02);
  const ValidationResult d = validate_structure(stuck, cfg);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.message().find("deadlock"), std::string::npos) << d.message();
}

// Equal slices of one long sequence plus packed short chunks, equal per-layer times: splitting
// each rank's layers into vpp virtual stages shortens the step (the bubble shrinks with vpp, as
// Megatron's (pp - 1) / (vpp m + pp - 1)), slices and all.
TEST(EppInterleaved, VirtualStagesShrinkTheBubbleOfSlicedBatches) {
  for (int k : {4, 8}) {
    double step[3] = {0, 0, 0};
    for (int vpp : {1, 2}) {
      Config cfg = small_config(4, vpp, 8);
      std::vector<std::vector<testing::SliceSpec>> chunks;
      for (int j = 0; j < k; ++j) chunks.push_back({{0, 1000 * j, 1000}});
      for (int q = 1; q <= 4; ++q) chunks.push_back({{q, 0, 1000}});
      Plan p = plan_from_chunks(cfg, {1000 * k, 1000, 1000, 1000, 1000}, chunks);
      schedule_epp(p);
      set_uniform_times(p, 1.0 / vpp, 2.0 / vpp);
      const Replay r = schedule_replay(p, {});
      ASSERT_FALSE(r.deadlock) << r.deadlock_reason;
      step[vpp] = r.step_time;
    }
    EXPECT_LT(step[2], step[1]) << "K " << k;
  }
}

// The memory trace holds per virtual stage: a rank's activation bytes after each action are
// those of the (stage, chunk) pairs between their forward and backward, whichever of the rank's
// virtual stages they are on; the dK/dV buffers of one stage never cross to another.
TEST(EppInterleaved, MemoryTraceCountsEveryVirtualStagesChunksInFlight) {
  Config cfg = small_config(2, 2, 8);
  std::mt19937 rng(7);
  const cost::CostModel cm = cost::CostModel::from_config(cfg);
  for (int trial = 0; trial < 10; ++trial) {
    Plan p = plan_random(cfg, rng, 6 + trial);
    random_pipelines(p, rng);
    schedule_epp(p);
    ASSERT_TRUE(validate_structure(p, cfg).ok());
    const MemoryTrace t = schedule_memory_trace(p, cm, cfg);
    for (int r = 0; r < 2; ++r) {
      // Chunks with no cut sequence hold exactly their activations and K/V from F to B.
      int64_t live = t.static_bytes[r];
      bool exact = true;
      for (size_t i = 0; i < p.actions[r].size(); ++i) {
        const Action& a = p.actions[r][i];
        const Chunk& c = p.chunks[a.chunk];
        if (c.kind() != ChunkKind::batched) exact = false;
        const auto sh = c.shapes();
        const cost::StageShape st = stage_shape(p.stages[a.stage]);
        const int64_t bytes = cm.activation_bytes(sh, st, 0) + cm.kv_keep_bytes(sh, st);
        live += a.kind == ActionKind::forward ? bytes : -bytes;
        if (exact) {
          EXPECT_EQ(t.steps[r][i].after, live) << "trial " << trial << " action " << i;
        }
      }
      EXPECT_EQ(t.steps[r].back().after, t.static_bytes[r]) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace infinipipe::plan
