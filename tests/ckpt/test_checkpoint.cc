// Checkpoints: round trip, sharded saves by several "ranks", resharded loads, damage detection,
// crash leftovers, model mismatch messages and the atomic `latest` pointer.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_config.h"
#include "ckpt/checkpoint_fs.h"
#include "core/error.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;

// A small Llama's parameters under their Hugging Face names, with values and gradients.
struct Params {
  struct P {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> value, grad;
    int64_t numel() const { return int64_t(value.size()); }
  };
  std::vector<P> all;

  explicit Params(const ModelConfig& m, uint32_t seed) {
    const int64_t h = m.hidden_size, f = m.ffn_size(), v = m.vocab_size;
    const int64_t kv = m.kv_heads() * m.head_dim();
    add("model.embed_tokens.weight", {v, h});
    for (int64_t l = 0; l < m.num_layers; l++) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      add(p + "input_layernorm.weight", {h});
      add(p + "self_attn.q_proj.weight", {h, h});
      add(p + "self_attn.k_proj.weight", {kv, h});
      add(p + "self_attn.v_proj.weight", {kv, h});
      add(p + "self_attn.o_proj.weight", {h, h});
      add(p + "post_attention_layernorm.weight", {h});
      add(p + "mlp.gate_proj.weight", {f, h});
      add(p + "mlp.up_proj.weight", {f, h});
      add(p + "mlp.down_proj.weight", {h, f});
    }
    add("model.norm.weight", {h});
    add("lm_head.weight", {v, h});
    randomize(seed);
  }
  void add(const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    all.push_back({name, shape, std::vector<float>(n), std::vector<float>(n)});
  }
  void randomize(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 0.02f);
    for (P& p : all) {
      for (float& x : p.value) x = d(rng);
    }
  }
  void grads(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (P& p : all) {
      for (float& x : p.grad) x = d(rng);
    }
  }
  // The parameters whose name passes `keep` (a pipeline stage's share).
  template <typename F>
  std::vector<OptimTensor> optim(F keep) {
    std::vector<OptimTensor> out;
    for (P& p : all) {
      if (keep(p.name)) out.push_back({p.name, p.shape, p.value, p.grad});
    }
    return out;
  }
  std::vector<OptimTensor> optim() {
    return optim([](const std::string&) { return true; });
  }
};

std::vector<CheckpointTensor> to_save(const std::vector<OptimTensor>& ts) {
  std::vector<CheckpointTensor> out;
  for (const OptimTensor& t : ts) out.push_back({t.name, t.shape, t.value});
  return out;
}
std::vector<CheckpointTarget> to_load(const std::vector<OptimTensor>& ts) {
  std::vector<CheckpointTarget> out;
  for (const OptimTensor& t : ts) out.push_back({t.name, t.shape, t.value});
  return out;
}

ModelConfig small_model() {
  ModelConfig m;
  m.num_layers = 2;
  m.hidden_size = 16;
  m.num_attention_heads = 4;
  m.num_query_groups = 2;
  m.ffn_hidden_size = 24;
  m.vocab_size = 19;
  m.seq_length = 64;
  return m;
}

bool is_layer1_or_head(const std::string& n) {
  return n.find("layers.1.") != std::string::npos || n == "model.norm.weight" ||
         n == "lm_head.weight";
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("ip_ckpt_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CheckpointMeta meta(int64_t iteration) const {
    CheckpointMeta m;
    m.iteration = iteration;
    m.consumed_samples = iteration * 16;
    m.model = model_;
    m.rng = {{"seed", 1234}, {"stream", iteration}};
    m.config = {{"train_iters", 100}, {"lr", 3e-4}};
    return m;
  }
  // Trains `steps` AdamW steps on p with seeded gradients.
  static void train(Params& p, ParamOptimizer& opt, int steps, uint32_t seed) {
    for (int s = 0; s < steps; s++) {
      p.grads(seed + s);
      auto views = p.optim();
      opt.step(views, 1e-3);
    }
  }
  std::string iter_file(int64_t it, const std::string& f) const {
    return (fs::path(checkpoint_iter_dir(dir_, it)) / f).string();
  }

  std::string dir_;
  ModelConfig model_ = small_model();
};

void expect_same_state(const ParamOptimizer& a, const ParamOptimizer& b,
                       const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    ASSERT_TRUE(b.has_state(n)) << n;
    EXPECT_EQ(a.state(n).step, b.state(n).step) << n;
    EXPECT_EQ(a.state(n).exp_avg, b.state(n).exp_avg) << n;
    EXPECT_EQ(a.state(n).exp_avg_sq, b.state(n).exp_avg_sq) << n;
  }
}

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
  EXPECT_EQ(fs_read_text(dir_ + "/latest"), "3\n");
  EXPECT_EQ(fs_read_text(dir_ + "/latest_checkpointed_iteration.txt"), "3\n");
  EXPECT_EQ(checkpoint_iter_dir(dir_, 3), (fs::path(dir_) / "iter_0000003").string());
  const nlohmann::json hf = nlohmann::json::parse(fs_read_text(iter_file(3, "config.json")));
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

  const auto index =
      nlohmann::json::parse(fs_read_text(iter_file(2, "model.safetensors.index.json")));
  EXPECT_EQ(index["weight_map"]["lm_head.weight"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"], "model-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"].size(), p.all.size());
  const auto optim_index =
      nlohmann::json::parse(fs_read_text(iter_file(2, "optimizer.safetensors.index.json")));
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

TEST_F(CheckpointTest, ChecksumDamageIsDetected) {
  Params p(model_, 7);
  CheckpointShard shard;
  auto views = p.optim();
  shard.params = to_save(views);
  checkpoint_save(dir_, meta(5), shard);
  // Flip one bit of tensor data: same size, valid header, only the checksum can tell.
  const std::string file = iter_file(5, "model.safetensors");
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-10, std::ios::end);
    char c;
    f.get(c);
    f.seekp(-10, std::ios::end);
    f.put(static_cast<char>(c ^ 0x04));
  }
  Params q(model_, 8);
  CheckpointReader r(dir_);
  auto qviews = q.optim();
  try {
    r.load_params(to_load(qviews));
    FAIL() << "damage not detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
  // A damaged config.json (same size) is caught when the checkpoint is opened.
  std::string cfg = fs_read_text(iter_file(5, "config.json"));
  cfg[cfg.find("float32") + 5] = '6';
  std::ofstream(iter_file(5, "config.json"), std::ios::trunc) << cfg;
  EXPECT_TRUE(checkpoint_is_complete(dir_, 5));  // complete, but damaged
  try {
    CheckpointReader r2(dir_, 5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json: checksum mismatch"), std::string::npos)
        << e.what();
  }
  // A truncated file no longer has the size state.json recorded: the directory is incomplete.
  fs::resize_file(iter_file(5, "optimizer.safetensors"), 8);
  EXPECT_FALSE(checkpoint_is_complete(dir_, 5));
  try {
    CheckpointReader r3(dir_, 5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a complete checkpoint"), std::string::npos);
  }
}

TEST_F(CheckpointTest, HalfWrittenCheckpointsAreIgnored) {
  Params p(model_, 9);
  ParamOptimizer opt(OptimizerOptions{});
  train(p, opt, 1, 90);
  CheckpointShard shard;
  auto views = p.optim();
  shard.params = to_save(views);
  shard.optimizer = &opt;
  checkpoint_save(dir_, meta(10), shard);
  // A crash during the save of iteration 20: the shard is written, the commit never happened.
  train(p, opt, 1, 91);
  checkpoint_save_shard(dir_, 20, shard);
  EXPECT_FALSE(checkpoint_is_complete(dir_, 20));
  EXPECT_EQ(checkpoint_find_latest(dir_), 10);
  EXPECT_EQ(CheckpointReader(dir_).iteration(), 10);
  // A crash between state.json and `latest`: `latest` is the commit point and still wins.
  checkpoint_save(dir_, meta(20), shard);
  fs_write_atomic(dir_ + "/latest", "10\n");
  EXPECT_EQ(checkpoint_find_latest(dir_), 10);
  // `latest` lost or naming a vanished directory: the newest complete directory is used.
  fs::remove(dir_ + "/latest");
  EXPECT_EQ(checkpoint_find_latest(dir_), 20);
  fs_write_atomic(dir_ + "/latest", "30\n");
  EXPECT_EQ(checkpoint_find_latest(dir_), 20);
  fs_write_atomic(dir_ + "/latest", "garbage");
  EXPECT_EQ(checkpoint_find_latest(dir_), 20);
  // A shard truncated after the commit makes that directory incomplete too.
  fs::resize_file(iter_file(20, "optimizer.safetensors"), 100);
  EXPECT_EQ(checkpoint_find_latest(dir_), 10);
  // Re-saving an iteration first invalidates it, so a crash mid-save never mixes old and new.
  checkpoint_save_shard(dir_, 10, shard);
  EXPECT_FALSE(checkpoint_is_complete(dir_, 10));
  EXPECT_FALSE(checkpoint_find_latest(dir_).has_value());
  try {
    CheckpointReader r(dir_);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--load"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, DifferentModelIsRefusedNamingTheFields) {
  ModelConfig saved = model_;
  saved.hidden_size = 512;
  ModelConfig current = model_;
  current.hidden_size = 256;
  const auto diff = checkpoint_model_diff(saved, current);
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_EQ(diff[0], "checkpoint has hidden-size 512, this run has 256");
  current.num_layers = 3;
  current.tie_embeddings = true;
  EXPECT_EQ(checkpoint_model_diff(saved, current).size(), 3u);
  current = saved;
  current.seq_length *= 4;  // a longer context is not a different model
  EXPECT_TRUE(checkpoint_model_diff(saved, current).empty());

  Params p(model_, 11);
  CheckpointShard shard;
  auto views = p.optim();
  shard.params = to_save(views);
  checkpoint_save(dir_, meta(1), shard);
  CheckpointReader r(dir_);
  ModelConfig other = model_;
  other.num_layers = 4;
  other.num_query_groups = 4;
  try {
    r.check_model(other);
    FAIL();
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("checkpoint has num-layers 2, this run has 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("checkpoint has num-query-groups 2, this run has 4"), std::string::npos);
  }
  // A tensor of another shape is refused by load_params even without check_model.
  std::vector<float> buf(16 * 8);
  std::vector<CheckpointTarget> wrong = {{"model.norm.weight", {16, 8}, buf}};
  try {
    r.load_params(wrong);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape [16] in the checkpoint, this run expects [16, 8]"),
              std::string::npos)
        << e.what();
  }
  std::vector<CheckpointTarget> missing = {{"model.layers.7.mlp.up_proj.weight", {24, 16}, buf}};
  EXPECT_THROW(r.load_params(missing), Error);
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

TEST_F(CheckpointTest, CommitRemovesLeftoversOfAnotherLayout) {
  Params p(model_, 13);
  auto views = p.optim();
  // An abandoned 2-rank attempt at iteration 4, then a 1-rank save of the same iteration.
  CheckpointShard s1;
  s1.rank = 1, s1.num_ranks = 2;
  s1.params = {to_save(views).front()};
  checkpoint_save_shard(dir_, 4, s1);
  std::ofstream(iter_file(4, "model.safetensors.tmp")) << "partial";
  CheckpointShard all;
  all.params = to_save(views);
  checkpoint_save(dir_, meta(4), all);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(checkpoint_iter_dir(dir_, 4))) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  const std::vector<std::string> want = {"config.json",
                                         "model.safetensors",
                                         "model.safetensors.index.json",
                                         "optimizer.safetensors",
                                         "optimizer.safetensors.index.json",
                                         "shard-rank00000.json",
                                         "state.json"};
  EXPECT_EQ(names, want);
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
  }
}

TEST_F(CheckpointTest, ListAndVerifyAll) {
  Params p(model_, 14);
  CheckpointShard shard;
  auto views = p.optim();
  shard.params = to_save(views);
  checkpoint_save(dir_, meta(1), shard);
  checkpoint_save(dir_, meta(2), shard);
  checkpoint_save_shard(dir_, 3, shard);  // interrupted
  const std::vector<CheckpointEntry> list = checkpoint_list(dir_);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_TRUE(list[0].complete && !list[0].latest);
  EXPECT_TRUE(list[1].complete && list[1].latest);
  EXPECT_TRUE(!list[2].complete && !list[2].latest);
  EXPECT_EQ(list[2].iteration, 3);

  CheckpointReader r(dir_, 1);
  EXPECT_GT(r.verify_all(), 0);
  // Damage the optimizer file's data (it is not read by load_params): verify_all still finds it.
  const std::string f = iter_file(2, "optimizer.safetensors");
  std::string bytes = fs_read_text(f);
  bytes[8] ^= 0x01;  // the first header byte
  std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
  CheckpointReader r2(dir_, 2);
  try {
    r2.verify_all();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
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

TEST(FsAtomicFile, UncommittedWriteLeavesTheOldFile) {
  const std::string path =
      (fs::temp_directory_path() / ("ip_atomic_" + std::to_string(::getpid()))).string();
  fs_write_atomic(path, "old");
  {
    FsAtomicFile f(path);
    f.write("new content", 11);
    // destroyed without commit(): as if the process died mid-write
  }
  EXPECT_EQ(fs_read_text(path), "old");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  fs_write_atomic(path, "new");
  EXPECT_EQ(fs_read_text(path), "new");
  fs::remove(path);
}

}  // namespace
}  // namespace infinipipe
