// One reader of config.json: an infinipipe checkpoint (CheckpointReader) and a Hugging Face folder
// (HfModelReader) read the very same file into the same model, with LlamaConfig's defaults for
// absent optional fields, and refuse the same bad file with the same ConfigError.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint_fixture.h"
#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_checksum.h"
#include "ckpt/checkpoint_fs.h"
#include "ckpt/hf_config.h"
#include "ckpt/hf_folder.h"
#include "common/error_text.h"
#include "common/file_text.h"
#include "core/error.h"

namespace infinipipe::ckpt_test {
namespace {

using infinipipe::testing::config_error_of;

// Every field the reader sets.
void expect_same_model(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_query_groups, b.num_query_groups);
  EXPECT_EQ(a.ffn_hidden_size, b.ffn_hidden_size);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rotary_base, b.rotary_base);
  EXPECT_EQ(a.norm_epsilon, b.norm_epsilon);
  EXPECT_EQ(a.tie_embeddings, b.tie_embeddings);
  EXPECT_EQ(a.seq_length, b.seq_length);
}

class HfConfigTest : public CheckpointTest {
 protected:
  void SetUp() override {
    CheckpointTest::SetUp();
    Params p(model_, 1);
    CheckpointShard shard;
    auto views = p.optim();
    shard.params = to_save(views);
    checkpoint_save(dir_, meta(2), shard);
    iter_dir_ = checkpoint_iter_dir(dir_, 2);
    saved_ = nlohmann::json::parse(file_text(iter_file(2, "config.json")));
  }

  // Replaces the checkpoint's config.json, with the checksum state.json records for it, so only
  // the reader of its fields can refuse it.
  void rewrite_config(const nlohmann::json& config) {
    const std::string path = iter_file(2, "config.json");
    std::ofstream(path, std::ios::trunc) << config.dump(2);
    const FileChecksum sum = checksum_file(path);
    const std::string state_path = iter_file(2, "state.json");
    nlohmann::json state = nlohmann::json::parse(file_text(state_path));
    state["files"]["config.json"] = {{"crc32c", checksum_hex(sum.crc32c)}, {"bytes", sum.bytes}};
    std::ofstream(state_path, std::ios::trunc) << state.dump(2);
  }

  std::string iter_dir_;
  nlohmann::json saved_;
};

TEST_F(HfConfigTest, CheckpointAndFolderReadTheSameModel) {
  const ModelConfig from_checkpoint = CheckpointReader(dir_).model();
  const ModelConfig from_folder = HfModelReader(iter_dir_).model();
  expect_same_model(from_checkpoint, from_folder);
  EXPECT_EQ(from_checkpoint.num_layers, model_.num_layers);
  EXPECT_EQ(from_checkpoint.kv_heads(), model_.kv_heads());
  EXPECT_EQ(from_checkpoint.max_position_embeddings, model_.max_positions());
  EXPECT_TRUE(checkpoint_model_diff(from_checkpoint, model_).empty());
}

TEST_F(HfConfigTest, AbsentOptionalFieldsTakeLlamaConfigDefaultsOnBothPaths) {
  nlohmann::json config = saved_;
  for (const char* key : {"num_key_value_heads", "max_position_embeddings", "rope_theta",
                          "rms_norm_eps", "tie_word_embeddings", "head_dim", "hidden_act"}) {
    config.erase(key);
  }
  config["rope_scaling"] = nullptr;
  rewrite_config(config);
  const ModelConfig from_checkpoint = CheckpointReader(dir_).model();
  const ModelConfig from_folder = HfModelReader(iter_dir_).model();
  expect_same_model(from_checkpoint, from_folder);
  EXPECT_EQ(from_folder.kv_heads(), model_.num_attention_heads);
  EXPECT_EQ(from_folder.max_position_embeddings, 2048);
  EXPECT_EQ(from_folder.rotary_base, 10000.0);
  EXPECT_EQ(from_folder.norm_epsilon, 1e-6);
  EXPECT_FALSE(from_folder.tie_embeddings);
}

TEST_F(HfConfigTest, ABadFileIsTheSameConfigErrorOnBothPaths) {
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](auto& j) { j["hidden_size"] = 32.9; }, "field hidden_size must be an integer"},
      {[](auto& j) { j["num_hidden_layers"] = 1e300; }, "field num_hidden_layers"},
      {[](auto& j) { j["vocab_size"] = -5; }, "field vocab_size"},
      {[](auto& j) { j["rope_theta"] = "big"; }, "field rope_theta must be a number"},
      {[](auto& j) { j["tie_word_embeddings"] = "yes"; }, "field tie_word_embeddings"},
      {[](auto& j) { j["num_key_value_heads"] = 64; }, "field num_key_value_heads"},
      {[](auto& j) { j.erase("intermediate_size"); }, "lacks the field intermediate_size"},
      {[](auto& j) { j["model_type"] = "gemma"; }, "model_type is \"gemma\"; infinipipe knows"},
      {[](auto& j) { j["model_type"] = "mistral"; }, "field attention_bias is not one"},
      {[](auto& j) { j["hidden_act"] = "gelu"; }, "hidden_act is \"gelu\""},
      {[](auto& j) { j["num_key_value_heads"] = 3; }, "the model it describes is invalid"},
      {[](auto& j) {
         j["hidden_size"] = int64_t{1} << 40;
         j["intermediate_size"] = int64_t{1} << 40;
         j.erase("head_dim");
       },
       "the model it describes is invalid"},
      {[](auto& j) { j = nlohmann::json::array(); }, "not a JSON object"},
  };
  for (const auto& [change, want] : cases) {
    nlohmann::json config = saved_;
    change(config);
    rewrite_config(config);
    const std::string from_checkpoint = config_error_of([&] { CheckpointReader r(dir_); });
    const std::string from_folder = config_error_of([&] { HfModelReader r(iter_dir_); });
    EXPECT_EQ(from_checkpoint, from_folder);
    EXPECT_NE(from_folder.find(want), std::string::npos) << want << ": " << from_folder;
    EXPECT_NE(from_folder.find(iter_file(2, "config.json")), std::string::npos) << from_folder;
  }
}

TEST(HfConfig, FieldErrorsSayHowToFixThem) {
  nlohmann::json j = {{"model_type", "llama"},    {"num_hidden_layers", 2},     {"hidden_size", 64},
                      {"num_attention_heads", 4}, {"intermediate_size", "128"}, {"vocab_size", 50}};
  const std::string e = config_error_of([&] { hf_config_to_model(j, "config.json"); });
  EXPECT_NE(e.find("config.json: field intermediate_size"), std::string::npos) << e;
  EXPECT_NE(e.find("correct it in the file"), std::string::npos) << e;
  j["intermediate_size"] = 128;
  EXPECT_EQ(hf_config_to_model(j, "config.json").ffn_hidden_size, 128);
}

}  // namespace
}  // namespace infinipipe::ckpt_test
