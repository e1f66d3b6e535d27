// The checkpoint tests' fixture: a small Llama's parameters under their Hugging Face names, the
// views the checkpoint takes of them, and a scratch checkpoint directory per test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"

namespace infinipipe::ckpt_test {

namespace fs = std::filesystem;

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

inline std::vector<CheckpointTensor> to_save(const std::vector<OptimTensor>& ts) {
  std::vector<CheckpointTensor> out;
  for (const OptimTensor& t : ts) out.push_back({t.name, t.shape, t.value});
  return out;
}
inline std::vector<CheckpointTarget> to_load(const std::vector<OptimTensor>& ts) {
  std::vector<CheckpointTarget> out;
  for (const OptimTensor& t : ts) out.push_back({t.name, t.shape, t.value});
  return out;
}

inline ModelConfig small_model() {
  ModelConfig m;
  // untied, the model these tests were written for (Megatron-LM ties by default)
  m.tie_embeddings = false;
  m.num_layers = 2;
  m.hidden_size = 16;
  m.num_attention_heads = 4;
  m.num_query_groups = 2;
  m.ffn_hidden_size = 24;
  m.vocab_size = 19;
  m.seq_length = 64;
  return m;
}

inline bool is_layer1_or_head(const std::string& n) {
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

inline void expect_same_state(const ParamOptimizer& a, const ParamOptimizer& b,
                              const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    ASSERT_TRUE(b.has_state(n)) << n;
    EXPECT_EQ(a.state(n).step, b.state(n).step) << n;
    EXPECT_EQ(a.state(n).exp_avg, b.state(n).exp_avg) << n;
    EXPECT_EQ(a.state(n).exp_avg_sq, b.state(n).exp_avg_sq) << n;
  }
}

}  // namespace infinipipe::ckpt_test
