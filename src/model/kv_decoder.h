// Inference of the whole model with a K/V cache: each call runs only the new tokens through the
// layers, attending to the cached K/V of every earlier position, so generating one token costs one
// position's forward instead of the whole prefix's. The maths is the training forward's (the same
// kernels, RoPE and attention of src/model/engine.cc), with no stash and no loss.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/memory.h"
#include "model/params.h"

namespace infinipipe {

class KvCacheDecoder {
 public:
  // params: the whole model (embedding, every layer, final norm and LM head), borrowed for the
  // decoder's life. capacity: positions the cache holds, at most the model's max positions.
  KvCacheDecoder(ModelParams& params, MemoryTracker& tracker, int64_t capacity);

  int64_t position() const { return position_; }  // tokens cached so far
  int64_t capacity() const { return capacity_; }
  const ModelConfig& config() const { return params_.config(); }

  // Runs `tokens` at positions position() .. position() + T − 1, caches their K/V and returns
  // the logits (T, V) of every token when all_logits, else (1, V) of the last one. ConfigError
  // when the tokens do not fit in the cache or one is outside the vocabulary.
  std::vector<float> forward(std::span<const int32_t> tokens, bool all_logits = false);
  // Forgets the cached positions (the next forward starts at position 0).
  void reset() { position_ = 0; }

 private:
  void check_tokens(std::span<const int32_t> tokens) const;
  void layer_forward(int64_t l, float* x, const std::vector<int64_t>& pos);
  std::vector<float> head_forward(const float* x, int64_t rows);

  ModelParams& params_;
  MemoryTracker& tracker_;
  int64_t capacity_ = 0;
  int64_t position_ = 0;
  std::vector<float> inv_freq_;
  std::vector<Tensor> k_cache_, v_cache_;  // per layer (capacity, KVH·HS); K after RoPE
};

}  // namespace infinipipe
