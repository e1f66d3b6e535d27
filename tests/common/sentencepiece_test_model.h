// A small SentencePiece model trained in a test's folder with the library's own trainer (no
// downloads), on lines of made-up words so that it learns pieces longer than one character:
// the tokenizer tests compare infinipipe's SentencePiece types with the library on it.
#pragma once

#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/data_test_util.h"

namespace infinipipe::data::test {

// n lines of 1 to 12 of the words below, some separated by a comma, from `seed`.
inline std::vector<std::string> sentencepiece_corpus_lines(int n, uint64_t seed) {
  const std::vector<std::string> words{"pipe",   "line",      "stage", "slice", "chunk", "token",
                                       "packed", "recompute", "über",  "naïve", "42",    "the"};
  std::mt19937_64 rng(seed);
  const auto below = [&rng](uint64_t k) { return rng() % k; };
  std::vector<std::string> lines;
  for (int i = 0; i < n; ++i) {
    std::string s;
    const uint64_t len = 1 + below(12);
    for (uint64_t w = 0; w < len; ++w) {
      if (w > 0) s += below(6) == 0 ? ", " : " ";
      s += words[below(words.size())];
    }
    lines.push_back(s);
  }
  return lines;
}

// Trains a unigram model of about 48 pieces on 400 corpus lines into PREFIX.model; returns
// that path (a failed training is a test failure).
inline std::string sentencepiece_test_model_train(const std::string& prefix) {
  const std::string text = prefix + ".txt";
  {
    std::ofstream out(text);
    for (const std::string& l : sentencepiece_corpus_lines(400, 1)) out << l << "\n";
  }
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + text + " --model_prefix=" + prefix +
      " --vocab_size=48 --hard_vocab_limit=false --model_type=unigram --character_coverage=1.0 "
      "--num_threads=1 --minloglevel=2");
  EXPECT_TRUE(status.ok()) << status.ToString();
  return prefix + ".model";
}

// A test with that model trained in its own folder, and the library's encoding to compare with.
class SentencePieceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = sentencepiece_test_model_train(dir_.file("m"));
    ASSERT_TRUE(sp_.Load(model_).ok());
  }
  std::vector<int32_t> library(const std::string& text) const {
    std::vector<int> ids;
    EXPECT_TRUE(sp_.Encode(text, &ids).ok());
    return {ids.begin(), ids.end()};
  }

  ScratchDir dir_;
  std::string model_;
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace infinipipe::data::test
