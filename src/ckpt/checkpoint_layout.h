// File names inside a checkpoint directory, shared by the saving and the loading code.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace infinipipe {

inline constexpr const char* kCkptState = "state.json";
inline constexpr const char* kCkptConfig = "config.json";
inline constexpr const char* kCkptGenerationConfig = "generation_config.json";
inline constexpr const char* kCkptTokenizerConfig = "tokenizer_config.json";
inline constexpr const char* kCkptTokenizerModel = "tokenizer.model";
inline constexpr const char* kCkptTokenizerJson = "tokenizer.json";
inline constexpr const char* kCkptModelIndex = "model.safetensors.index.json";
inline constexpr const char* kCkptOptimIndex = "optimizer.safetensors.index.json";
inline constexpr const char* kCkptLatest = "latest";
inline constexpr const char* kCkptLatestMegatron = "latest_checkpointed_iteration.txt";
inline constexpr int kCkptFormatVersion = 1;

// "model.safetensors" for one writer, Hugging Face's "model-00002-of-00004.safetensors" for many.
std::string checkpoint_shard_file(const char* kind, int64_t rank, int64_t num_ranks);
std::string checkpoint_manifest_file(int64_t rank);  // shard-rank00002.json
// Parses a checkpoint JSON file (core/input_file.h: a regular file, never through a link,
// bounded), Error naming it when it is unreadable or not JSON.
nlohmann::json checkpoint_read_json(const std::string& path);

}  // namespace infinipipe
