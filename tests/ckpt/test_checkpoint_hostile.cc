// Hostile checkpoint files: each is refused with an Error naming the file and the field, never
// truncated into an answer, never a crash or a library exception.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_config.h"
#include "ckpt/checkpoint_state.h"
#include "ckpt/hf_config.h"
#include "ckpt/safetensors.h"
#include "common/error_text.h"
#include "core/error.h"

namespace infinipipe {
namespace {

namespace fs = std::filesystem;

nlohmann::json hf_config() {
  ModelConfig m;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.seq_length = 128;
  return checkpoint_hf_config(m);
}

TEST(CheckpointHostile, ConfigNumbersMustBeIntegersInRange) {
  EXPECT_EQ(infinipipe::testing::error_text([] { hf_config_to_model(hf_config(), "config.json"); }),
            "");
  for (const auto& [key, value] : std::vector<std::pair<const char*, nlohmann::json>>{
           {"hidden_size", 32.9},
           {"num_hidden_layers", 2.5},
           {"num_hidden_layers", 1e300},
           {"vocab_size", -5},
           {"intermediate_size", "many"},
           {"num_attention_heads", nlohmann::json::array()}}) {
    nlohmann::json j = hf_config();
    j[key] = value;
    const std::string e =
        infinipipe::testing::error_text([&] { hf_config_to_model(j, "config.json"); });
    EXPECT_NE(e.find(std::string("config.json: field ") + key), std::string::npos)
        << key << " = " << value.dump() << ": " << e;
  }
}

TEST(CheckpointHostile, ConfigOfAnImpossibleModelIsRefused) {
  nlohmann::json j = hf_config();
  j["hidden_size"] = int64_t{1} << 40;
  j["intermediate_size"] = int64_t{1} << 40;
  const std::string e =
      infinipipe::testing::error_text([&] { hf_config_to_model(j, "config.json"); });
  EXPECT_NE(e.find("the model it describes is invalid"), std::string::npos) << e;
  j = hf_config();
  j["tie_word_embeddings"] = "yes";
  EXPECT_NE(infinipipe::testing::error_text([&] {
              hf_config_to_model(j, "config.json");
            }).find("tie_word"),
            std::string::npos);
}

nlohmann::json state_json() {
  return {{"format", "infinipipe-checkpoint"},
          {"version", 1},
          {"iteration", 3},
          {"consumed_samples", 48},
          {"num_ranks", 1},
          {"optimizer", "adamw"},
          {"rng", nlohmann::json::object()},
          {"config", nlohmann::json::object()},
          {"rank_states", nlohmann::json::array({nlohmann::json::object()})},
          {"files", {{"model.safetensors", {{"crc32c", "00000000"}, {"bytes", 8}}}}}};
}

TEST(CheckpointHostile, StateFieldsAreTyped) {
  const CheckpointState s = checkpoint_state_from_json(state_json(), "state.json");
  EXPECT_EQ(s.iteration, 3);
  EXPECT_EQ(s.files.at("model.safetensors").second, 8);
  const auto with = [](const char* key, nlohmann::json v) {
    nlohmann::json j = state_json();
    j[key] = std::move(v);
    return infinipipe::testing::error_text([&] { checkpoint_state_from_json(j, "state.json"); });
  };
  EXPECT_NE(with("iteration", 2.5).find("state.json: iteration must be an integer"),
            std::string::npos);
  EXPECT_NE(with("consumed_samples", INT64_MAX).find("consumed_samples"), std::string::npos);
  EXPECT_NE(with("num_ranks", 0).find("num_ranks"), std::string::npos);
  EXPECT_NE(with("optimizer", 7).find("optimizer must be a string"), std::string::npos);
  EXPECT_NE(with("format", 7).find("not an infinipipe checkpoint"), std::string::npos);
  EXPECT_NE(with("files", {{"model.safetensors", {{"crc32c", 1}, {"bytes", 8}}}}).find("crc32c"),
            std::string::npos);
  EXPECT_NE(with("files", "x").find("files must be an object"), std::string::npos);
}

TEST(CheckpointHostile, IndexEntriesAreTyped) {
  const CheckpointState s = checkpoint_state_from_json(state_json(), "state.json");
  const nlohmann::json good = {{"weight_map", {{"w", "model.safetensors"}}}};
  EXPECT_EQ(checkpoint_index_from_json(good, "index.json", s.files).at("w"), "model.safetensors");
  EXPECT_NE(infinipipe::testing::error_text([&] {
              checkpoint_index_from_json({{"weight_map", {{"w", 3}}}}, "index.json", s.files);
            }).find("index.json: weight_map.w must be a string"),
            std::string::npos);
  EXPECT_NE(infinipipe::testing::error_text([&] {
              checkpoint_index_from_json(nlohmann::json::array(), "index.json", s.files);
            }).find("index.json must be an object"),
            std::string::npos);
}

std::string temp_dir(const char* name) {
  const fs::path d = fs::temp_directory_path() /
                     ("infinipipe_ckpt_hostile_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

void write_safetensors(const std::string& path, const std::string& header) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header;
}

TEST(CheckpointHostile, DeeplyNestedSafetensorsShapeIsAnError) {
  const std::string dir = temp_dir("deep");
  const std::string path = dir + "/model.safetensors";
  write_safetensors(path, "{\"w\": {\"dtype\": \"F32\", \"shape\": " + std::string(200000, '[') +
                              std::string(200000, ']') + ", \"data_offsets\": [0, 0]}}");
  const std::string e = infinipipe::testing::error_text([&] { SafetensorsReader r(path); });
  EXPECT_NE(e.find("nests arrays or objects more than 64 levels"), std::string::npos) << e;
  write_safetensors(path,
                    "{\"w\": {\"dtype\": \"F32\", \"shape\": [[[1]]], \"data_offsets\": "
                    "[0, 4]}}");
  EXPECT_NE(infinipipe::testing::error_text([&] {
              SafetensorsReader r(path);
            }).find("not a non-negative integer"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(CheckpointHostile, SymlinkLoopInTheDirectoryIsNotACrash) {
  const std::string dir = temp_dir("loop");
  fs::create_symlink(dir + "/iter_0000001", dir + "/iter_0000001");
  EXPECT_TRUE(checkpoint_list(dir).empty());
  const std::string e = infinipipe::testing::error_text([&] { CheckpointReader r(dir); });
  EXPECT_NE(e.find("no complete checkpoint there"), std::string::npos) << e;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace infinipipe
