// The decoding loop of `infinipipe generate`: the prompt's forward fills the K/V cache, then each
// new token is picked from the last logits and run alone through the model (one position's
// forward), until the end-of-sequence token, the token budget or the model's max positions.
// Tokens only: the tokenizer is the caller's (the model layer knows none).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/kv_decoder.h"
#include "model/sampling.h"

namespace infinipipe {

struct GenerateOptions {
  int64_t max_new_tokens = 64;  // ≥ 1
  SamplingOptions sampling;
  uint64_t seed = 1234;  // of the sampling draws
  int32_t eos = -1;      // stop once this token is generated (it is kept); −1: none
  int32_t eod = -1;      // also stops: the end of document the training data used, when not eos
  // false: every step runs the whole sequence again from position 0, as without a cache (HF's
  // use_cache=False); the tokens are the same, only slower. For measuring what the cache saves.
  bool kv_cache = true;
};

enum class GenerateStop { eos, max_new_tokens, max_positions };
const char* generate_stop_name(GenerateStop s);

struct GenerateResult {
  std::vector<int32_t> tokens;  // the new tokens (the eos one included), not the prompt
  GenerateStop stop = GenerateStop::max_new_tokens;
  double prompt_seconds = 0;  // the prompt's forward and the first token's pick
  double decode_seconds = 0;  // every later token
};

// Called with each new token as soon as it is picked (to stream it).
using GenerateTokenSink = std::function<void(int32_t token)>;

// The largest prompt `generate` takes: one position must stay for a new token.
int64_t generate_max_prompt_tokens(const ModelConfig& model);

// ConfigError for an empty prompt, one too long for the model's max positions, or bad options.
// decoder: of the model to run, with a cache of at least min(max positions, prompt + max new
// tokens) positions; it is reset first.
GenerateResult generate(KvCacheDecoder& decoder, std::span<const int32_t> prompt,
                        const GenerateOptions& opts, const GenerateTokenSink& on_token = {});

}  // namespace infinipipe
