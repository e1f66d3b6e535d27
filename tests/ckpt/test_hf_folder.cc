// Hugging Face folders in and out at the checkpoint layer: the 16-bit conversions, a hand-written
// folder (bf16, sharded) read tensor for tensor, every hostile folder refused with one clear
// error, and `checkpoint export` refusing a non-empty or linked destination.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_config.h"
#include "ckpt/float_convert.h"
#include "ckpt/hf_export.h"
#include "ckpt/hf_folder.h"
#include "common/error_text.h"
#include "common/hf_folder_write.h"
#include "common/test_temp.h"
#include "core/error.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;
using testing::error_text;

ModelConfig small_model() {
  ModelConfig m;
  m.num_layers = 2;
  m.hidden_size = 32;
  m.num_attention_heads = 4;
  m.num_query_groups = 2;
  m.ffn_hidden_size = 64;
  m.vocab_size = 50;
  m.max_position_embeddings = 128;
  m.norm_epsilon = 1e-5;
  return m;
}

TEST(FloatConvert, SixteenBitFormatsToFp32) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);               // largest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_f32(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  // Every bf16 survives fp32 and back bit for bit; rounding is to nearest even.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float v = bf16_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(v))));
    } else {
      ASSERT_EQ(f32_to_bf16(v), b) << b;
    }
  }
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie: down to even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie: up to even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u)))));
}

class HfFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::test_temp_path("hf");
    fs::remove_all(dir_);
    tensors_ = testing::hf_random_tensors(model_, true, 3);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Loads every tensor of the model; the error's text, "" on success.
  std::string load(const fs::path& dir) {
    return error_text([&] {
      HfModelReader r(dir.string());
      std::vector<std::vector<float>> buffers;
      std::vector<CheckpointTarget> targets;
      for (const auto& [name, shape] : testing::hf_llama_shapes(model_)) {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        buffers.emplace_back(static_cast<size_t>(n));
        targets.push_back({name, shape, buffers.back()});
      }
      r.load_params(targets);
    });
  }
  void write(const nlohmann::json& config, int shards) {
    testing::hf_write_folder(dir_, config, tensors_, true, shards);
  }

  ModelConfig model_ = small_model();
  fs::path dir_;
  std::map<std::string, testing::HfTensor> tensors_;
};

TEST_F(HfFolderTest, HandWrittenShardedBf16FolderReadsExactly) {
  write(testing::hf_llama_config(model_), 3);
  HfModelReader r(dir_.string());
  EXPECT_TRUE(checkpoint_model_diff(r.model(), model_).empty());
  EXPECT_EQ(r.model().max_position_embeddings, 128);
  for (const auto& [name, t] : tensors_) {
    std::vector<float> got(t.values.size());
    const CheckpointTarget target{name, t.shape, got};
    r.load_params({&target, 1});
    EXPECT_EQ(0, std::memcmp(got.data(), t.values.data(), got.size() * 4)) << name;
  }
}

// F16 weights, subnormals included, load as the values their bits mean (computed here from the
// format's definition, not with the converter under test).
TEST_F(HfFolderTest, F16FolderReadsExactly) {
  std::mt19937 rng(5);
  std::map<std::string, testing::HfTensor> f16;
  for (const auto& [name, shape] : testing::hf_llama_shapes(model_)) {
    testing::HfTensor t;
    t.shape = shape;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    for (int64_t i = 0; i < n; ++i) {
      // Exponent 0 (subnormal) to 16 (below 2): small weights, every tenth one subnormal.
      const uint16_t exponent = i % 10 == 0 ? 0 : static_cast<uint16_t>(rng() % 17);
      const uint16_t bits =
          static_cast<uint16_t>((rng() % 2) << 15 | exponent << 10 | rng() % 1024);
      const double mantissa = bits & 0x3ff;
      const double magnitude =
          exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
      t.values.push_back(static_cast<float>((bits & 0x8000) ? -magnitude : magnitude));
      t.bytes.push_back(static_cast<uint8_t>(bits & 0xff));
      t.bytes.push_back(static_cast<uint8_t>(bits >> 8));
    }
    f16[name] = std::move(t);
  }
  fs::create_directories(dir_);
  std::ofstream(dir_ / "config.json") << testing::hf_llama_config(model_).dump();
  std::map<std::string, const testing::HfTensor*> all;
  for (const auto& [name, t] : f16) all[name] = &t;
  testing::hf_write_safetensors(dir_ / "model.safetensors", all, "F16");
  HfModelReader r(dir_.string());
  for (const auto& [name, t] : f16) {
    std::vector<float> got(t.values.size());
    const CheckpointTarget target{name, t.shape, got};
    r.load_params({&target, 1});
    EXPECT_EQ(got, t.values) << name;
  }
}

TEST_F(HfFolderTest, UnsupportedConfigFieldsAreRefusedWithTheReason) {
  const std::vector<std::pair<std::pair<const char*, nlohmann::json>, const char*>> cases = {
      {{"model_type", "mistral"}, "field attention_bias is not one infinipipe knows"},
      {{"model_type", "gpt2"}, "model_type is \"gpt2\""},
      {{"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}}, "plain RoPE only"},
      {{"attention_bias", true}, "attention_bias is true"},
      {{"mlp_bias", true}, "mlp_bias is true"},
      {{"hidden_act", "gelu"}, "hidden_act is \"gelu\""},
      {{"architectures", {"MistralForCausalLM"}}, "model is [\"LlamaForCausalLM\"]"},
      {{"head_dim", 7}, "head size kv-channels = 7 must be even"},
      {{"rope_parameters", {{"rope_type", "yarn"}}}, "rope_parameters is"},
      {{"sliding_window", 4096}, "field sliding_window is not one"},
      {{"hidden_size", "32"}, "hidden_size"},
  };
  for (const auto& [field, want] : cases) {
    nlohmann::json config = testing::hf_llama_config(model_);
    config[field.first] = field.second;
    fs::remove_all(dir_);
    write(config, 1);
    const std::string e = error_text([&] { HfModelReader r(dir_.string()); });
    EXPECT_NE(e.find(want), std::string::npos) << field.first << ": " << e;
    EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  }
  nlohmann::json config = testing::hf_llama_config(model_);
  config.erase("num_hidden_layers");
  fs::remove_all(dir_);
  write(config, 1);
  EXPECT_NE(error_text([&] { HfModelReader r(dir_.string()); }).find("num_hidden_layers"),
            std::string::npos);
}

TEST_F(HfFolderTest, HostileFoldersAreOneClearError) {
  write(testing::hf_llama_config(model_), 2);
  const fs::path index = dir_ / "model.safetensors.index.json";
  nlohmann::json j = nlohmann::json::parse(std::ifstream(index));
  const std::string some = j["weight_map"].begin().key();
  auto with_index = [&](const nlohmann::json& changed) {
    std::ofstream(index, std::ios::trunc) << changed.dump();
    return load(dir_);
  };
  nlohmann::json outside = j;
  outside["weight_map"][some] = "../model-00001-of-00002.safetensors";
  EXPECT_NE(with_index(outside).find("not a .safetensors file inside the folder"),
            std::string::npos);
  nlohmann::json absolute = j;
  absolute["weight_map"][some] = "/etc/passwd";
  EXPECT_NE(with_index(absolute).find("inside the folder"), std::string::npos);
  nlohmann::json missing = j;
  missing["weight_map"][some] = "model-00003-of-00003.safetensors";
  EXPECT_NE(with_index(missing).find("which is missing"), std::string::npos);
  nlohmann::json misplaced = j;  // the tensor is in the other shard
  misplaced["weight_map"][some] = j["weight_map"][some] == "model-00001-of-00002.safetensors"
                                      ? "model-00002-of-00002.safetensors"
                                      : "model-00001-of-00002.safetensors";
  EXPECT_NE(with_index(misplaced).find("has no tensor " + some), std::string::npos);
  EXPECT_NE(with_index({{"weight_map", 3}}).find("weight_map is not an object"), std::string::npos);
  std::ofstream(index, std::ios::trunc) << "{\"weight_map\": {";
  EXPECT_NE(load(dir_).find("not valid JSON"), std::string::npos);
  std::ofstream(index, std::ios::trunc) << j.dump();
  EXPECT_EQ(load(dir_), "");

  // A tensor of another shape, or of a dtype infinipipe does not read.
  auto one_tensor_changed = [&](const std::string& name, std::vector<int64_t> shape,
                                const char* dtype) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "config.json") << testing::hf_llama_config(model_).dump();
    std::map<std::string, const testing::HfTensor*> all;
    for (const auto& [n, t] : tensors_) all[n] = &t;
    testing::HfTensor changed = tensors_.at(name);
    changed.shape = std::move(shape);
    all[name] = &changed;
    if (std::string(dtype) == "BF16") {
      testing::hf_write_safetensors(dir_ / "model.safetensors", all, "BF16");
    } else {  // I16 has bf16's element size, so the header is consistent
      testing::hf_write_safetensors(dir_ / "model.safetensors", all, dtype);
    }
    return load(dir_);
  };
  const std::string norm = "model.layers.1.input_layernorm.weight";
  EXPECT_NE(one_tensor_changed(norm, {2, 16}, "BF16").find("has shape [2, 16]"), std::string::npos);
  EXPECT_NE(one_tensor_changed(norm, {32}, "I16").find("has dtype I16"), std::string::npos);

  // A tensor the model needs is absent; a folder without weights or config is not a model.
  fs::remove_all(dir_);
  std::map<std::string, testing::HfTensor> fewer = tensors_;
  fewer.erase("model.norm.weight");
  testing::hf_write_folder(dir_, testing::hf_llama_config(model_), fewer, true, 1);
  EXPECT_NE(load(dir_).find("has no tensor model.norm.weight"), std::string::npos);
  fs::remove(dir_ / "model.safetensors");
  EXPECT_NE(load(dir_).find("is not a Hugging Face model folder"), std::string::npos);
}

TEST_F(HfFolderTest, LinkedFilesAreNotFollowed) {
  write(testing::hf_llama_config(model_), 1);
  fs::rename(dir_ / "config.json", dir_ / "real.json");
  fs::create_symlink("real.json", dir_ / "config.json");
  EXPECT_NE(load(dir_).find("symbolic link"), std::string::npos);
}

// config.json and the index are read by core/input_file.h: a FIFO or an oversized file is one
// clear ConfigError at once, never a wait for a writer or a read of gigabytes.
TEST_F(HfFolderTest, ItsJsonFilesGoThroughTheBoundedReader) {
  write(testing::hf_llama_config(model_), 1);
  fs::remove(dir_ / "config.json");
  ASSERT_EQ(::mkfifo((dir_ / "config.json").c_str(), 0600), 0);
  std::string e = load(dir_);
  EXPECT_NE(e.find("config.json is a FIFO (named pipe), not a regular file"), std::string::npos)
      << e;
  fs::remove_all(dir_);
  // Sparse: past the bound without using the disk.
  write(testing::hf_llama_config(model_), 2);
  fs::resize_file(dir_ / "model.safetensors.index.json", (int64_t{64} << 20) + 1);
  e = load(dir_);
  EXPECT_NE(e.find("more than the 64 MiB a model folder JSON file may be"), std::string::npos) << e;
  EXPECT_THROW(HfModelReader{dir_.string()}, ConfigError);
}

TEST_F(HfFolderTest, ExportRefusesANonEmptyOrLinkedDestination) {
  // A checkpoint to export: the folder's weights saved by infinipipe.
  write(testing::hf_llama_config(model_), 1);
  std::vector<CheckpointTensor> params;
  for (const auto& [name, t] : tensors_) params.push_back({name, t.shape, t.values});
  CheckpointMeta meta;
  meta.model = model_;
  CheckpointShard shard;
  shard.params = params;
  const fs::path ck = dir_ / "ck", out = dir_ / "out";
  checkpoint_save(ck.string(), meta, shard);

  fs::create_directories(out);
  std::ofstream(out / "keep.txt") << "mine";
  EXPECT_NE(error_text([&] { hf_export(ck.string(), out.string(), {}); }).find("is not empty"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(out / "keep.txt"));
  EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  const fs::path elsewhere = dir_ / "elsewhere", link = dir_ / "link";
  fs::create_directories(elsewhere);
  fs::create_directory_symlink(elsewhere, link);
  EXPECT_NE(error_text([&] { hf_export(ck.string(), link.string(), {}); }).find("symbolic link"),
            std::string::npos);
  EXPECT_TRUE(fs::is_empty(elsewhere));

  // Sharded above the size: the index lists every tensor once, in files that exist.
  HfExportOptions small;
  small.max_shard_bytes = 20'000;
  const HfExportResult r = hf_export(ck.string(), (dir_ / "sharded").string(), small);
  EXPECT_GT(r.shards, 1);
  HfModelReader back((dir_ / "sharded").string());
  EXPECT_EQ(back.param_names().size(), tensors_.size());
  EXPECT_EQ(load(dir_ / "sharded"), "");
}

}  // namespace
}  // namespace infinipipe
