// Checkpoints save and load: a bit-identical round trip, sharded saves by several "ranks" and
// resharded loads, optimizer kinds and weights-only checkpoints, and any parameter view type.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint_fixture.h"
#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_config.h"
#include "ckpt/checkpoint_fs.h"
#include "common/file_text.h"
#include "core/error.h"

namespace infinipipe::ckpt_test {
namespace {

TEST_F(CheckpointTest, SaveLoadRoundTripIsBitIdentical) {
  Params p(model_, 1);
  ParamOptimizer opt(OptimizerOptions{});
  train(p, opt, 3, 10);
  CheckpointShard shard;
  auto views = p.optim();
  shard.params = to_save(views);
  shard.optimizer = &opt;
  shard.rank_state = {{"rng", "abc"}};
  checkpoint_save(dir_, meta(3), shard);

  for (const char* f : {"config.json", "model.safetensors", "optimizer.safetensors",
                        "model.safetensors.index.json", "state.json"}) {
    EXPECT_TRUE(fs::exists(iter_file(3, f))) << f;
  }
  EXPECT_EQ(file_text(dir_ + "/latest"), "3\n");
  EXPECT_EQ(file_text(dir_ + "/latest_checkpointed_iteration.txt"), "3\n");
  EXPECT_EQ(checkpoint_iter_dir(dir_, 3), (fs::path(dir_) / "iter_0000003").string());
  const nlohmann::json hf = nlohmann::json::parse(file_text(iter_file(3, "config.json")));
  EXPECT_EQ(hf["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(hf["model_type"], "llama");
  EXPECT_EQ(hf["torch_dtype"], "float32");
  EXPECT_EQ(hf["hidden_size"], 16);
  EXPECT_EQ(hf["intermediate_size"], 24);
  EXPECT_EQ(hf["num_key_value_heads"], 2);
  EXPECT_EQ(hf["tie_word_embeddings"], false);

  Params q(model_, 2);  // different values, overwritten by the load
  ParamOptimizer opt2(OptimizerOptions{});
  CheckpointReader r(dir_);
  EXPECT_EQ(r.iteration(), 3);
  EXPECT_EQ(r.consumed_samples(), 48);
  EXPECT_EQ(r.rng()["stream"], 3);
  EXPECT_EQ(r.config()["train_iters"], 100);
  EXPECT_EQ(r.rank_state(0)["rng"], "abc");
  EXPECT_EQ(r.optimizer_kind(), "adamw");
  r.check_model(model_);
  auto qviews = q.optim();
  r.load_params(to_load(qviews));
  r.load_optimizer(to_load(qviews), opt2);
  for (size_t i = 0; i < p.all.size(); i++) EXPECT_EQ(p.all[i].value, q.all[i].value);
  expect_same_state(opt, opt2, opt.state_names());
  // And training continues identically.
  train(p, opt, 2, 50);
  train(q, opt2, 2, 50);
  for (size_t i = 0; i < p.all.size(); i++) EXPECT_EQ(p.all[i].value, q.all[i].value);
}

TEST_F(CheckpointTest, TwoRanksSaveShardsThenAnyLayoutLoads) {
  Params p(model_, 3);
  // Two pipeline stages, each with its own optimizer over its own parameters.
  ParamOptimizer opt0(OptimizerOptions{}), opt1(OptimizerOptions{});
  auto stage0 = p.optim([](const std::string& n) { return !is_layer1_or_head(n); });
  auto stage1 = p.optim(is_layer1_or_head);
  for (int s = 0; s < 2; s++) {
    p.grads(70 + s);
    opt0.step(stage0, 1e-3);
    opt1.step(stage1, 1e-3);
  }
  CheckpointShard s0, s1;
  s0.rank = 0, s1.rank = 1;
  s0.num_ranks = s1.num_ranks = 2;
  s0.params = to_save(stage0), s1.params = to_save(stage1);
  s0.optimizer = &opt0, s1.optimizer = &opt1;
  s0.rank_state = {{"r", 0}}, s1.rank_state = {{"r", 1}};
  checkpoint_save_shard(dir_, 2, s1);  // ranks finish in any order
  EXPECT_FALSE(checkpoint_find_latest(dir_).has_value());
  try {
    checkpoint_commit(dir_, meta(2));  // rank 0 has not written yet
    FAIL() << "commit before all shards must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
  }
  checkpoint_save_shard(dir_, 2, s0);
  checkpoint_commit(dir_, meta(2));

  const auto index = nlohmann::json::parse(file_text(iter_file(2, "model.safetensors.index.json")));
  EXPECT_EQ(index["weight_map"]["lm_head.weight"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"], "model-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"].size(), p.all.size());
  const auto optim_index =
      nlohmann::json::parse(file_text(iter_file(2, "optimizer.safetensors.index.json")));
  EXPECT_EQ(optim_index["weight_map"]["lm_head.weight.exp_avg_sq"],
            "optimizer-00002-of-00002.safetensors");
  EXPECT_EQ(optim_index["weight_map"]["model.layers.0.mlp.up_proj.weight.step"],
            "optimizer-00001-of-00002.safetensors");
  EXPECT_EQ(optim_index["weight_map"].size(), 3 * p.all.size());

  // Load everything on one rank (pp 2 -> 1).
  Params q(model_, 4);
  ParamOptimizer all(OptimizerOptions{});
  CheckpointReader r(dir_);
  EXPECT_EQ(r.num_ranks(), 2);
  EXPECT_EQ(r.rank_state(1)["r"], 1);
  auto qviews = q.optim();
  r.load_params(to_load(qviews));
  r.load_optimizer(to_load(qviews), all);
  for (size_t i = 0; i < p.all.size(); i++) EXPECT_EQ(p.all[i].value, q.all[i].value);
  expect_same_state(opt0, all, opt0.state_names());
  expect_same_state(opt1, all, opt1.state_names());

  // Load a subset that cuts across the saved shards (a different stage split).
  Params z(model_, 5);
  auto cross = z.optim([](const std::string& n) {
    return n == "model.embed_tokens.weight" || n.find("layers.1.mlp") != std::string::npos;
  });
  ParamOptimizer part(OptimizerOptions{});
  CheckpointReader r2(dir_, 2);
  r2.load_params(to_load(cross));
  r2.load_optimizer(to_load(cross), part);
  EXPECT_EQ(part.state_names().size(), cross.size());
  for (size_t i = 0; i < p.all.size(); i++) {
    const bool loaded = z.all[i].name == "model.embed_tokens.weight" ||
                        z.all[i].name.find("layers.1.mlp") != std::string::npos;
    EXPECT_EQ(p.all[i].value == z.all[i].value, loaded) << z.all[i].name;
  }
}

TEST_F(CheckpointTest, OverlappingShardsAreRefused) {
  Params p(model_, 6);
  auto views = p.optim();
  CheckpointShard s0, s1;
  s0.num_ranks = s1.num_ranks = 2;
  s1.rank = 1;
  s0.params = to_save(views);
  s1.params = {to_save(views).back()};
  checkpoint_save_shard(dir_, 1, s0);
  checkpoint_save_shard(dir_, 1, s1);
  try {
    checkpoint_commit(dir_, meta(1));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lm_head.weight was saved by two ranks"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir_ + "/latest"));
}

TEST_F(CheckpointTest, OptimizerKindAndWeightsOnlyCheckpoints) {
  Params p(model_, 12);
  OptimizerOptions sgd;
  sgd.kind = Optimizer::sgd;
  ParamOptimizer opt(sgd);
  train(p, opt, 2, 120);
  CheckpointShard shard;
  auto views = p.optim();
  shard.params = to_save(views);
  shard.optimizer = &opt;
  checkpoint_save(dir_, meta(2), shard);
  {
    CheckpointReader r(dir_);
    ParamOptimizer adam(OptimizerOptions{});
    EXPECT_THROW(r.load_optimizer(to_load(views), adam), ConfigError);
    ParamOptimizer sgd2(sgd);
    r.load_optimizer(to_load(views), sgd2);
    EXPECT_EQ(sgd2.state(views[0].name).step, 2);
  }
  // --train-iters 0 --save: initial weights, no optimizer state; loading starts it fresh.
  shard.optimizer = nullptr;
  checkpoint_save(dir_, meta(0), shard);
  CheckpointReader r0(dir_, 0);
  EXPECT_EQ(r0.optimizer_kind(), "none");
  ParamOptimizer fresh(OptimizerOptions{});
  r0.load_optimizer(to_load(views), fresh);
  EXPECT_TRUE(fresh.state_names().empty());
  EXPECT_EQ(checkpoint_find_latest(dir_), 0);  // `latest` follows the last commit
}

// The model hands out ParamRef {name, shape, value, grad, numel}; the helpers take any such type.
struct RefLike {
  std::string name;
  std::vector<int64_t> shape;
  float* value;
  float* grad;
  int64_t numel;
};

TEST_F(CheckpointTest, ParamRefViewsRoundTrip) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8};
  std::vector<RefLike> refs = {{"lm_head.weight", {3, 2}, a.data(), nullptr, 6},
                               {"model.norm.weight", {2}, b.data(), nullptr, 2}};
  CheckpointShard shard;
  shard.params = checkpoint_tensors(refs);
  checkpoint_save(dir_, meta(1), shard);
  std::vector<float> a2(6), b2(2);
  std::vector<RefLike> out = {{"model.norm.weight", {2}, b2.data(), nullptr, 2},
                              {"lm_head.weight", {3, 2}, a2.data(), nullptr, 6}};
  CheckpointReader r(dir_);
  r.load_params(checkpoint_targets(out));
  EXPECT_EQ(a2, a);
  EXPECT_EQ(b2, b);
  EXPECT_EQ(r.param_names(), (std::vector<std::string>{"lm_head.weight", "model.norm.weight"}));
}

}  // namespace
}  // namespace infinipipe::ckpt_test
