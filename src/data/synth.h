// `infinipipe data synth`: a synthetic corpus whose document lengths follow a named
// distribution (lengths.h) and whose byte tokens have structure a small model can learn:
// a seeded order-2 Markov chain over a few dozen "words", sentences, and long-range copies of
// earlier spans of the same document (so longer context lowers the loss). docs/data.md
// describes the generator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace infinipipe::data {

class SynthLanguage {
 public:
  static constexpr int kWords = 48;
  static constexpr int kCandidates = 4;  // next words a context can lead to

  explicit SynthLanguage(uint64_t seed);

  // Exactly `length` tokens (length >= 1): text bytes, then the end-of-document token.
  std::vector<int32_t> document(int64_t length, uint64_t doc_seed) const;

  const std::vector<std::string>& words() const { return words_; }

 private:
  std::vector<std::string> words_;
  // next_[(a * kWords + b) * kCandidates + j]: j-th likeliest word after the words a, b.
  std::vector<int32_t> next_;
};

struct SynthOptions {
  std::string distribution = "github";
  int64_t num_documents = 1000;
  int64_t seq_length = 8192;
  uint64_t seed = 1234;
  std::string output;  // PREFIX: writes PREFIX.bin and PREFIX.idx (dtype uint16)
};

struct SynthSummary {
  int64_t documents = 0;
  int64_t tokens = 0;
};

// Throws ConfigError for bad options (unknown distribution, non-positive sizes, no output).
SynthSummary synth_corpus_write(const SynthOptions& options);

}  // namespace infinipipe::data
