// Choosing the next token from its logits, with Hugging Face generate's semantics: greedy
// (argmax), or sampling after the logits warpers in HF's order — temperature, then top-k, then
// top-p (nucleus). Deterministic for a seed on every platform: the generator is specified here.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace infinipipe {

struct SamplingOptions {
  bool greedy = false;       // argmax, whatever the other fields (HF's do_sample=False)
  double temperature = 1.0;  // logits / temperature; 0 means greedy; must be ≥ 0
  int64_t top_k = 0;         // keep the k most likely tokens (ties at the k-th kept); 0 = all
  double top_p = 1.0;        // keep the most likely tokens whose probability reaches p; (0, 1]

  bool is_greedy() const { return greedy || temperature == 0.0; }
  // ConfigError naming the flag (--temperature, --top-k, --top-p) and the accepted range.
  void validate() const;
};

// splitmix64: a small generator whose sequence is fixed by its definition, so a seed gives the
// same text with any compiler and standard library.
class SamplingRng {
 public:
  explicit SamplingRng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1), 53 random bits

 private:
  uint64_t state_;
};

// The first index of the largest logit.
int32_t sampling_argmax(std::span<const float> logits);

// The distribution sampling draws from: softmax(logits / temperature) restricted to the tokens
// top-k and then top-p keep, renormalised (zeros elsewhere). Not for greedy options.
std::vector<double> sampling_distribution(std::span<const float> logits,
                                          const SamplingOptions& opts);

// The next token: argmax when greedy, otherwise a draw from sampling_distribution.
int32_t sampling_pick(std::span<const float> logits, const SamplingOptions& opts, SamplingRng& rng);

}  // namespace infinipipe
