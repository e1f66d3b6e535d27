#include "data/synth.h"

#include <algorithm>

#include "core/error.h"
#include "data/indexed_dataset.h"
#include "data/lengths.h"
#include "data/rng.h"
#include "tokenize/byte_tokenizer.h"

namespace infinipipe::data {

namespace {

constexpr double kNextProbs[SynthLanguage::kCandidates] = {0.55, 0.25, 0.12, 0.08};
constexpr double kSentenceEnd = 0.1;  // chance a sentence ends after a word
constexpr double kNewline = 0.3;      // chance a sentence end starts a new line
constexpr double kCopy = 0.2;         // chance a new sentence repeats an earlier span instead
constexpr int64_t kCopyMin = 32;
constexpr int64_t kCopyMax = 512;

// splitmix64 finaliser: decorrelates the per-document seeds.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

SynthLanguage::SynthLanguage(uint64_t seed) {
  Rng rng(mix(seed));
  words_.resize(kWords);
  for (auto& w : words_) {
    const int64_t len = rng.range(2, 8);
    for (int64_t i = 0; i < len; ++i) w.push_back(static_cast<char>('a' + rng.below(26)));
  }
  next_.resize(static_cast<size_t>(kWords) * kWords * kCandidates);
  for (auto& w : next_) w = static_cast<int32_t>(rng.below(kWords));
}

std::vector<int32_t> SynthLanguage::document(int64_t length, uint64_t doc_seed) const {
  if (length < 1) fail("a synthetic document needs at least 1 token, got {}", length);
  Rng rng(mix(doc_seed));
  const auto text_len = static_cast<size_t>(length - 1);
  std::vector<int32_t> out;
  out.reserve(text_len + kCopyMax + 16);
  size_t a = rng.below(kWords), b = rng.below(kWords);
  while (out.size() < text_len) {
    // Next word from the order-2 context.
    const double u = rng.uniform();
    int j = 0;
    double acc = kNextProbs[0];
    while (j + 1 < kCandidates && u >= acc) acc += kNextProbs[++j];
    const size_t c = static_cast<size_t>(next_[(a * kWords + b) * kCandidates + j]);
    for (const char ch : words_[c]) out.push_back(static_cast<unsigned char>(ch));
    a = b;
    b = c;
    if (rng.uniform() >= kSentenceEnd) {
      out.push_back(' ');
      continue;
    }
    out.push_back('.');
    out.push_back(rng.uniform() < kNewline ? '\n' : ' ');
    // Repeat an earlier span: predictable only by a model that sees far enough back.
    const auto pos = static_cast<int64_t>(out.size());
    if (pos >= 2 * kCopyMin && rng.uniform() < kCopy) {
      const int64_t start = rng.range(0, pos - kCopyMin);
      const int64_t len = rng.range(kCopyMin, std::min(kCopyMax, pos - start));
      for (int64_t i = 0; i < len; ++i) {
        const int32_t t = out[static_cast<size_t>(start + i)];
        out.push_back(t);
      }
    }
  }
  out.resize(text_len);
  out.push_back(tokenize::kByteEod);
  return out;
}

SynthSummary synth_corpus_write(const SynthOptions& options) {
  if (options.output.empty()) fail_config("data synth needs --output PREFIX");
  if (options.num_documents <= 0) {
    fail_config("--num-documents must be positive, got {}", options.num_documents);
  }
  const std::vector<int64_t> lengths = lengths_synthetic(
      options.distribution, options.num_documents, options.seq_length, options.seed);
  const SynthLanguage language(options.seed);
  IndexedDatasetWriter writer(options.output, TokenDType::uint16);
  for (size_t d = 0; d < lengths.size(); ++d) {
    writer.add_document(language.document(lengths[d], options.seed ^ mix(d + 1)));
  }
  writer.finalize();
  return {writer.num_documents(), writer.num_tokens()};
}

}  // namespace infinipipe::data
