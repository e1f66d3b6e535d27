#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/test_temp.h"
#include "core/error.h"
#include "plan/plan_json.h"
#include "plan/schedule.h"
#include "plan/validate.h"
#include "test_plan_util.h"

namespace infinipipe::plan {
namespace {

void expect_same(const Plan& a, const Plan& b) {
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.schedule, b.schedule);
  EXPECT_EQ(a.pp, b.pp);
  EXPECT_EQ(a.vpp, b.vpp);
  EXPECT_EQ(a.seq_lengths, b.seq_lengths);
  ASSERT_EQ(a.chunks.size(), b.chunks.size());
  for (size_t c = 0; c < a.chunks.size(); ++c) {
    EXPECT_EQ(a.chunks[c].id, b.chunks[c].id);
    ASSERT_EQ(a.chunks[c].slices.size(), b.chunks[c].slices.size());
    for (size_t k = 0; k < a.chunks[c].slices.size(); ++k) {
      const Slice &x = a.chunks[c].slices[k], &y = b.chunks[c].slices[k];
      EXPECT_EQ(x.seq, y.seq);
      EXPECT_EQ(x.offset, y.offset);
      EXPECT_EQ(x.len, y.len);
      EXPECT_EQ(x.seq_len, y.seq_len);
    }
  }
  EXPECT_EQ(a.pipeline_of_chunk, b.pipeline_of_chunk);
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t s = 0; s < a.stages.size(); ++s) {
    EXPECT_EQ(a.stages[s].first_layer, b.stages[s].first_layer);
    EXPECT_EQ(a.stages[s].num_layers, b.stages[s].num_layers);
    EXPECT_EQ(a.stages[s].has_embedding, b.stages[s].has_embedding);
    EXPECT_EQ(a.stages[s].has_lm_head, b.stages[s].has_lm_head);
    EXPECT_EQ(a.stages[s].rank, b.stages[s].rank);
  }
  ASSERT_EQ(a.actions.size(), b.actions.size());
  for (size_t r = 0; r < a.actions.size(); ++r) {
    ASSERT_EQ(a.actions[r].size(), b.actions[r].size());
    for (size_t i = 0; i < a.actions[r].size(); ++i) {
      const Action &x = a.actions[r][i], &y = b.actions[r][i];
      EXPECT_EQ(x.kind, y.kind);
      EXPECT_EQ(x.chunk, y.chunk);
      EXPECT_EQ(x.stage, y.stage);
      EXPECT_EQ(x.recompute_layers, y.recompute_layers);
      EXPECT_EQ(x.predicted_time, y.predicted_time);  // JSON doubles round-trip exactly
    }
  }
  EXPECT_EQ(a.predicted_peak_bytes, b.predicted_peak_bytes);
  EXPECT_EQ(a.predicted_step_time, b.predicted_step_time);
  EXPECT_EQ(a.memory_budget, b.memory_budget);
}

class PlanJson : public ::testing::Test {
 protected:
  Config cfg = testing::small_config(4);
  cost::CostModel cost = cost::CostModel::from_config(cfg);
  Plan plan;
  void SetUp() override {
    std::mt19937 rng(11);
    plan = testing::plan_random(cfg, rng, 20);
    schedule_epp(plan);
    for (auto& list : plan.actions)
      for (Action& a : list) a.recompute_layers = (a.chunk % 3 == 0) ? 1 : 0;
    plan_predict(plan, cost, cfg);
    plan.memory_budget = int64_t{3} << 30;
  }
  std::string load_error(const nlohmann::json& j) {
    try {
      plan_from_json(j);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an Error for " << j.dump().substr(0, 200);
    return "";
  }
};

TEST_F(PlanJson, RoundTrip) {
  nlohmann::json j = plan_to_json(plan);
  Plan back = plan_from_json(j);
  expect_same(plan, back);
  EXPECT_EQ(plan_to_json(back), j);
  // Through text too.
  expect_same(plan, plan_from_json(nlohmann::json::parse(j.dump())));
  EXPECT_TRUE(validate(back, cost, cfg).ok());
}

TEST_F(PlanJson, SaveAndLoadFile) {
  const std::string path = test::test_temp_path("plan.json").string();
  plan_save(plan, path);
  expect_same(plan, plan_load(path));
  std::filesystem::remove(path);
  try {
    plan_load(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the plan file " + path + " cannot be read"), std::string::npos);
  }
  { std::ofstream(path) << "{ not json"; }
  try {
    plan_load(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not valid JSON"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST_F(PlanJson, MalformedInputGivesClearErrors) {
  nlohmann::json j = plan_to_json(plan);
  auto with = [&](auto edit) {
    nlohmann::json k = j;
    edit(k);
    return load_error(k);
  };
  EXPECT_NE(with([](auto& k) { k["version"] = 2; }).find("version 2 is not supported"),
            std::string::npos);
  EXPECT_NE(with([](auto& k) { k["format"] = "x"; }).find("not an infinipipe plan"),
            std::string::npos);
  EXPECT_NE(with([](auto& k) { k.erase("chunks"); }).find("lacks the field \"chunks\""),
            std::string::npos);
  EXPECT_NE(with([](auto& k) { k["pp"] = "four"; }).find("pp must be an integer"),
            std::string::npos);
  EXPECT_NE(with([](auto& k) {
              k["chunks"][0]["slices"][0][2] = 1 << 30;
            }).find("chunks[0].slices[0] = "),
            std::string::npos);
  EXPECT_NE(
      with([](auto& k) { k["chunks"][0]["slices"][0][0] = 999; }).find("seq = 999 is outside"),
      std::string::npos);
  EXPECT_NE(with([](auto& k) {
              k["actions"][1][0][2] = 0;
            }).find("actions[1][0] is for stage 0, which lives on rank 0, not rank 1"),
            std::string::npos);
  EXPECT_NE(with([](auto& k) { k["actions"][0][0][0] = "X"; }).find("expected \"F\" or \"B\""),
            std::string::npos);
  EXPECT_NE(with([](auto& k) { k["stages"].erase(0); }).find("stages must have 4 entries"),
            std::string::npos);
  EXPECT_NE(load_error(nlohmann::json::array()).find("must be an object"), std::string::npos);
}

TEST(PlanTypes, ActionPeers) {
  Plan p;
  p.pp = 4;
  p.vpp = 2;  // stages 0..7, stage s on rank s % 4
  Action f{ActionKind::forward, 0, 4, 0, 0};
  ActionPeers a = p.peers(f);
  EXPECT_EQ(a.recv_stage, 3);
  EXPECT_EQ(a.recv_rank, 3);
  EXPECT_EQ(a.send_stage, 5);
  EXPECT_EQ(a.send_rank, 1);
  ActionPeers first = p.peers({ActionKind::forward, 0, 0, 0, 0});
  EXPECT_EQ(first.recv_rank, -1);
  EXPECT_EQ(first.send_rank, 1);
  ActionPeers last_b = p.peers({ActionKind::backward, 0, 7, 0, 0});
  EXPECT_EQ(last_b.recv_rank, -1);
  EXPECT_EQ(last_b.send_stage, 6);
  EXPECT_EQ(last_b.send_rank, 2);
  ActionPeers first_b = p.peers({ActionKind::backward, 0, 0, 0, 0});
  EXPECT_EQ(first_b.recv_stage, 1);
  EXPECT_EQ(first_b.send_rank, -1);
}

TEST(PlanTypes, SliceAndChunkKinds) {
  Slice whole{0, 0, 100, 100}, first{1, 0, 50, 200}, mid{1, 50, 50, 200}, tail{1, 100, 100, 200};
  EXPECT_TRUE(whole.is_whole() && !whole.is_tail() && !whole.is_split());
  EXPECT_TRUE(first.is_split() && !first.is_tail() && !first.is_whole());
  EXPECT_TRUE(mid.is_split());
  EXPECT_TRUE(tail.is_tail() && !tail.is_split());
  Chunk b{0, {whole}}, s{1, {mid}}, h{2, {tail, whole}}, t{3, {tail}};
  EXPECT_EQ(b.kind(), ChunkKind::batched);
  EXPECT_EQ(s.kind(), ChunkKind::split);
  EXPECT_EQ(h.kind(), ChunkKind::hybrid);
  EXPECT_EQ(t.kind(), ChunkKind::hybrid);
  EXPECT_EQ(h.tokens(), 200);
  auto sh = s.shapes();
  ASSERT_EQ(sh.size(), 1u);
  EXPECT_EQ(sh[0].context, 50);
  EXPECT_EQ(sh[0].len, 50);
  EXPECT_FALSE(sh[0].final_slice);
  EXPECT_TRUE(h.shapes()[0].final_slice);
}

}  // namespace
}  // namespace infinipipe::plan
