// The model families through the one config reader: config.json files transformers 5.23 wrote
// (save_pretrained, tests/ckpt/data/hf_families/{llama,qwen2,qwen3,mistral}.json) and real hub
// configs in the 4.x format (hub_*.json), their parameter counts against transformers' own, every
// refusal naming its field, the tensors of each family and the config.json an export writes.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/checkpoint_config.h"
#include "ckpt/hf_config.h"
#include "ckpt/hf_tensors.h"
#include "common/build_paths.h"
#include "common/error_text.h"
#include "core/error.h"
#include "core/json_read.h"

namespace infinipipe::hf_families_test {
namespace {

using infinipipe::testing::config_error_of;

using Json = nlohmann::json;

std::string fixture_path(const std::string& name) {
  return std::string(INFINIPIPE_SOURCE_DIR) + "/tests/ckpt/data/hf_families/" + name;
}

Json fixture(const std::string& name) {
  return json_read_file(fixture_path(name));
}

// The expected counts are sum(p.numel() for p in model.parameters()) of
// transformers.AutoModelForCausalLM.from_config(config) for each file, transformers 5.23.0
// (the hub configs' models built on the meta device).
struct FamilyCase {
  const char* file;
  const char* family;
  int64_t kv_heads, head_dim, max_positions, sliding_window;
  double rope_theta;
  bool qkv_bias, qk_norm, tied;
  int64_t transformers_params;
};

const FamilyCase kCases[] = {
    {"llama.json", "llama", 2, 16, 512, 0, 10000.0, false, false, true, 150336},
    {"qwen2.json", "qwen2", 2, 16, 512, 0, 1000000.0, true, false, false, 214592},
    {"qwen3.json", "qwen3", 2, 24, 512, 0, 10000.0, false, true, false, 226720},
    {"mistral.json", "mistral", 2, 16, 512, 256, 10000.0, false, false, false, 214336},
    {"hub_llama3_8b.json", "llama", 8, 128, 8192, 0, 500000.0, false, false, false, 8030261248},
    {"hub_qwen2.5_7b.json", "qwen2", 4, 128, 131072, 0, 1000000.0, true, false, false, 7615616512},
    {"hub_qwen3_8b.json", "qwen3", 8, 128, 40960, 0, 1000000.0, false, true, false, 8190735360},
    {"hub_mistral_7b_v0.3.json", "mistral", 8, 128, 32768, 0, 1000000.0, false, false, false,
     7248023552},
};

TEST(HfFamilies, EachFamilyIsReadWithItsFeaturesAndTransformersParameterCount) {
  for (const FamilyCase& c : kCases) {
    SCOPED_TRACE(c.file);
    const ModelConfig m = hf_config_to_model(fixture(c.file), c.file);
    EXPECT_EQ(m.family, c.family);
    EXPECT_EQ(m.kv_heads(), c.kv_heads);
    EXPECT_EQ(m.head_dim(), c.head_dim);
    EXPECT_EQ(m.max_position_embeddings, c.max_positions);
    EXPECT_EQ(m.sliding_window, c.sliding_window);
    EXPECT_EQ(m.rotary_base, c.rope_theta);
    EXPECT_EQ(m.add_qkv_bias, c.qkv_bias);
    EXPECT_EQ(m.qk_layernorm, c.qk_norm);
    EXPECT_EQ(m.tie_embeddings, c.tied);
    EXPECT_EQ(m.params_total(), c.transformers_params);
  }
}

TEST(HfFamilies, AbsentFieldsTakeTheFamilysDefaults) {
  const Json shape = {{"num_hidden_layers", 2},
                      {"hidden_size", 1024},
                      {"num_attention_heads", 32},
                      {"intermediate_size", 128},
                      {"vocab_size", 50}};
  struct Want {
    const char* type;
    int64_t kv, head_dim, positions, window;
  };
  for (const Want& w : {Want{"llama", 32, 32, 2048, 0}, Want{"qwen2", 32, 32, 32768, 0},
                        Want{"qwen3", 32, 128, 32768, 0}, Want{"mistral", 8, 32, 131072, 4096}}) {
    Json j = shape;
    j["model_type"] = w.type;
    const ModelConfig m = hf_config_to_model(j, "config.json");
    EXPECT_EQ(m.kv_heads(), w.kv) << w.type;
    EXPECT_EQ(m.head_dim(), w.head_dim) << w.type;
    EXPECT_EQ(m.max_position_embeddings, w.positions) << w.type;
    EXPECT_EQ(m.sliding_window, w.window) << w.type;
    EXPECT_EQ(m.rotary_base, 10000.0) << w.type;
  }
}

TEST(HfFamilies, OldAndNewRopeFormatsGiveTheSameModel) {
  Json j = fixture("qwen3.json");
  const ModelConfig fresh = hf_config_to_model(j, "new");
  j.erase("rope_parameters");
  j["rope_theta"] = 10000.0;
  j["rope_scaling"] = nullptr;
  const ModelConfig old = hf_config_to_model(j, "old");
  EXPECT_EQ(old.rotary_base, fresh.rotary_base);
  EXPECT_TRUE(checkpoint_model_diff(old, fresh).empty());
  j["rope_theta"] = 20000.0;
  j["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "default"}};
  EXPECT_NE(config_error_of([&] { hf_config_to_model(j, "both"); }).find("keep one of them"),
            std::string::npos);
}

// One refusal per field: one ConfigError naming the file and the field.
TEST(HfFamilies, EachUnsupportedFieldIsRefusedByName) {
  struct Case {
    const char* file;
    std::function<void(Json&)> change;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"llama.json",
       [](Json& j) {
         j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2}};
       },
       "rope_scaling is"},
      {"qwen3.json",
       [](Json& j) {
         j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e4}};
       },
       "rope_parameters is"},
      {"qwen2.json", [](Json& j) { j["use_sliding_window"] = true; }, "use_sliding_window is true"},
      {"qwen3.json", [](Json& j) { j["use_sliding_window"] = true; }, "use_sliding_window is true"},
      {"qwen3.json", [](Json& j) { j["layer_types"][1] = "sliding_attention"; }, "layer_types is"},
      {"qwen3.json", [](Json& j) { j["layer_types"] = {"full_attention"}; },
       "layer_types has 1 entries"},
      {"llama.json", [](Json& j) { j["attention_bias"] = true; }, "attention_bias is true"},
      {"qwen3.json", [](Json& j) { j["attention_bias"] = true; }, "attention_bias is true"},
      {"mistral.json", [](Json& j) { j["attention_bias"] = true; }, "field attention_bias is not"},
      {"llama.json", [](Json& j) { j["mlp_bias"] = true; }, "mlp_bias is true"},
      {"qwen2.json", [](Json& j) { j["hidden_act"] = "gelu"; }, "hidden_act is \"gelu\""},
      {"mistral.json", [](Json& j) { j["attention_dropout"] = 0.1; }, "attention_dropout is 0.1"},
      {"llama.json", [](Json& j) { j["pretraining_tp"] = 2; }, "pretraining_tp is 2"},
      {"qwen2.json", [](Json& j) { j["use_mrope"] = true; }, "use_mrope is true"},
      {"qwen2.json",
       [](Json& j) {
         j["quantization_config"] = {{"bits", 4}};
       },
       "quantization_config"},
      {"qwen3.json", [](Json& j) { j["partial_rotary_factor"] = 0.5; },
       "field partial_rotary_factor is not one infinipipe knows for model_type qwen3"},
      {"llama.json", [](Json& j) { j["sliding_window"] = 64; }, "field sliding_window is not"},
      {"qwen2.json", [](Json& j) { j["architectures"] = {"LlamaForCausalLM"}; },
       "architectures is"},
      {"llama.json", [](Json& j) { j["model_type"] = "gemma"; }, "model_type is \"gemma\""},
      {"mistral.json", [](Json& j) { j["sliding_window"] = "wide"; }, "field sliding_window"},
      {"qwen3.json", [](Json& j) { j["head_dim"] = 7; }, "must be even"},
  };
  for (const Case& c : cases) {
    Json j = fixture(c.file);
    c.change(j);
    const std::string e = config_error_of([&] { hf_config_to_model(j, "DIR/config.json"); });
    EXPECT_NE(e.find(c.want), std::string::npos) << c.file << " " << c.want << ": " << e;
    EXPECT_NE(e.find("DIR/config.json"), std::string::npos) << e;
  }
}

TEST(HfFamilies, ASlidingWindowBelowSeqLengthIsRefusedAtOrAboveItIsFullAttention) {
  ModelConfig m = hf_config_to_model(fixture("mistral.json"), "mistral.json");
  m.seq_length = 256;
  EXPECT_NO_THROW(m.validate());  // the window masks nothing
  m.seq_length = 257;
  EXPECT_NE(config_error_of([&] {
              m.validate();
            }).find("sliding-window attention is not honoured: train with --seq-length <= 256"),
            std::string::npos);
}

TEST(HfFamilies, TensorsOfEachFamilyAreTransformersNamesAndShapes) {
  const ModelConfig qwen2 = hf_config_to_model(fixture("qwen2.json"), "qwen2");
  const auto t2 = hf_model_tensors(qwen2);
  EXPECT_EQ(t2.at("model.layers.1.self_attn.q_proj.bias"), (std::vector<int64_t>{64}));
  EXPECT_EQ(t2.at("model.layers.1.self_attn.k_proj.bias"), (std::vector<int64_t>{32}));
  EXPECT_EQ(t2.at("model.layers.1.self_attn.v_proj.bias"), (std::vector<int64_t>{32}));
  EXPECT_FALSE(t2.count("model.layers.1.self_attn.o_proj.bias"));
  EXPECT_FALSE(t2.count("model.layers.0.self_attn.q_norm.weight"));
  EXPECT_TRUE(t2.count("lm_head.weight"));
  const ModelConfig qwen3 = hf_config_to_model(fixture("qwen3.json"), "qwen3");
  const auto t3 = hf_model_tensors(qwen3);
  EXPECT_EQ(t3.at("model.layers.0.self_attn.q_norm.weight"), (std::vector<int64_t>{24}));
  EXPECT_EQ(t3.at("model.layers.0.self_attn.k_norm.weight"), (std::vector<int64_t>{24}));
  EXPECT_EQ(t3.at("model.layers.0.self_attn.q_proj.weight"), (std::vector<int64_t>{96, 64}));
  EXPECT_EQ(t3.at("model.layers.0.self_attn.o_proj.weight"), (std::vector<int64_t>{64, 96}));
  EXPECT_FALSE(t3.count("model.layers.0.self_attn.q_proj.bias"));
  // The tensors' elements are the parameter count.
  for (const ModelConfig* m : {&qwen2, &qwen3}) {
    int64_t n = 0;
    for (const auto& [name, shape] : hf_model_tensors(*m)) {
      int64_t e = 1;
      for (int64_t d : shape) e *= d;
      n += e;
    }
    EXPECT_EQ(n, m->params_total()) << m->family;
  }
}

TEST(HfFamilies, TheWrittenConfigReadsBackAsTheSameModel) {
  for (const char* file : {"llama.json", "qwen2.json", "qwen3.json", "mistral.json"}) {
    SCOPED_TRACE(file);
    const ModelConfig m = hf_config_to_model(fixture(file), file);
    const Json written = checkpoint_hf_config(m);
    EXPECT_EQ(written["model_type"], m.family);
    const ModelConfig back = hf_config_to_model(written, "written");
    EXPECT_TRUE(checkpoint_model_diff(m, back).empty());
    EXPECT_EQ(back.family, m.family);
    EXPECT_EQ(back.head_dim(), m.head_dim());
    EXPECT_EQ(back.sliding_window, m.sliding_window);
  }
  EXPECT_EQ(checkpoint_hf_config(hf_config_to_model(fixture("qwen3.json"), "q"))["architectures"],
            Json::array({"Qwen3ForCausalLM"}));
}

TEST(HfFamilies, TheModelDiffNamesTheNewFields) {
  const ModelConfig llama = hf_config_to_model(fixture("llama.json"), "l");
  ModelConfig qwen3 = llama;
  qwen3.family = "qwen3";
  qwen3.qk_layernorm = true;
  qwen3.kv_channels = 24;
  std::string all;
  for (const std::string& d : checkpoint_model_diff(llama, qwen3)) all += d + "\n";
  EXPECT_NE(all.find("model-family llama, this run has qwen3"), std::string::npos) << all;
  EXPECT_NE(all.find("qk-layernorm"), std::string::npos) << all;
  EXPECT_NE(all.find("kv-channels (head_dim) 16, this run has 24"), std::string::npos) << all;
  ModelConfig qwen2 = llama;
  qwen2.family = "qwen2";
  qwen2.add_qkv_bias = true;
  all.clear();
  for (const std::string& d : checkpoint_model_diff(llama, qwen2)) all += d + "\n";
  EXPECT_NE(all.find("add-qkv-bias"), std::string::npos) << all;
}

}  // namespace
}  // namespace infinipipe::hf_families_test
