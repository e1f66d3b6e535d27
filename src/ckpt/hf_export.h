// `infinipipe checkpoint export`: one clean Hugging Face model folder from any infinipipe
// checkpoint, whatever pp x dp layout wrote it: config.json, generation_config.json, the weights
// (model.safetensors, or shards with model.safetensors.index.json above the shard size) and the
// tokenizer files the checkpoint recorded. No optimizer state, no infinipipe bookkeeping.
#pragma once

#include <cstdint>
#include <string>

namespace infinipipe {

enum class HfExportDtype { fp32, bf16 };

struct HfExportOptions {
  HfExportDtype dtype = HfExportDtype::fp32;
  int64_t max_shard_bytes = 5'000'000'000;  // transformers' save_pretrained default ("5GB")
};

// What was written.
struct HfExportResult {
  int64_t iteration = 0;
  int64_t tensors = 0;
  int64_t shards = 0;
  int64_t bytes = 0;  // of the tensors
};

// Reads the newest complete checkpoint under `checkpoint_dir` and writes `out`, which must not
// exist or be an empty folder, and must not be a symbolic link (ConfigError otherwise).
HfExportResult hf_export(const std::string& checkpoint_dir, const std::string& out,
                         const HfExportOptions& options);

}  // namespace infinipipe
