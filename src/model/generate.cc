#include "model/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace infinipipe {

const char* generate_stop_name(GenerateStop s) {
  switch (s) {
    case GenerateStop::eos:
      return "the end-of-sequence token";
    case GenerateStop::max_new_tokens:
      return "--max-new-tokens";
    case GenerateStop::max_positions:
      return "the model's max positions";
  }
  return "?";
}

int64_t generate_max_prompt_tokens(const ModelConfig& model) {
  return model.max_positions() - 1;
}

namespace {

void generate_check(const KvCacheDecoder& decoder, std::span<const int32_t> prompt,
                    const GenerateOptions& opts, int64_t max_positions) {
  opts.sampling.validate();
  if (opts.max_new_tokens < 1) {
    fail_config("--max-new-tokens {} must be ≥ 1", opts.max_new_tokens);
  }
  const auto P = static_cast<int64_t>(prompt.size());
  if (P == 0) fail_config("the prompt is empty: give some text with --prompt or --prompt-file");
  if (P >= max_positions) {
    fail_config(
        "the prompt has {} tokens, but the model takes {} positions (max-position-embeddings) "
        "and one must stay for a new token: shorten the prompt to at most {} tokens",
        P, max_positions, max_positions - 1);
  }
  const int64_t needed = std::min(max_positions, P + std::min(opts.max_new_tokens, max_positions));
  if (decoder.capacity() < needed) {
    fail("generate: a K/V cache of {} positions for {} needed; this is a bug", decoder.capacity(),
         needed);
  }
}

// The logits of the token after `sequence`'s last: from the cache, or (without it) from the
// whole sequence run again.
std::vector<float> next_logits(KvCacheDecoder& decoder, std::span<const int32_t> sequence,
                               int64_t cached, bool kv_cache) {
  if (!kv_cache) {
    decoder.reset();
    return decoder.forward(sequence);
  }
  return decoder.forward(sequence.subspan(static_cast<size_t>(cached)));
}

}  // namespace

GenerateResult generate(KvCacheDecoder& decoder, std::span<const int32_t> prompt,
                        const GenerateOptions& opts, const GenerateTokenSink& on_token) {
  using Clock = std::chrono::steady_clock;
  const int64_t max_positions = decoder.config().max_positions();
  generate_check(decoder, prompt, opts, max_positions);
  decoder.reset();
  SamplingRng rng(opts.seed);
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());
  GenerateResult result;
  const Clock::time_point start = Clock::now();
  Clock::time_point first_picked = start;
  std::vector<float> logits = next_logits(decoder, sequence, 0, opts.kv_cache);
  for (;;) {
    const int32_t token = sampling_pick(logits, opts.sampling, rng);
    if (result.tokens.empty()) first_picked = Clock::now();
    result.tokens.push_back(token);
    sequence.push_back(token);
    if (on_token) on_token(token);
    if (token == opts.eos || (opts.eod >= 0 && token == opts.eod)) {
      result.stop = GenerateStop::eos;
      break;
    }
    if (static_cast<int64_t>(result.tokens.size()) == opts.max_new_tokens) {
      result.stop = GenerateStop::max_new_tokens;
      break;
    }
    if (static_cast<int64_t>(sequence.size()) == max_positions) {
      result.stop = GenerateStop::max_positions;
      break;
    }
    // The new token is the only one the cache lacks.
    logits = next_logits(decoder, sequence, decoder.position(), opts.kv_cache);
  }
  const Clock::time_point end = Clock::now();
  result.prompt_seconds = std::chrono::duration<double>(first_picked - start).count();
  result.decode_seconds = std::chrono::duration<double>(end - first_picked).count();
  return result;
}

}  // namespace infinipipe
