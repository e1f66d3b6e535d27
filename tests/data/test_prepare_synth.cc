#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <unordered_map>

#include "common/data_test_util.h"
#include "common/error_text.h"
#include "core/error.h"
#include "data/indexed_dataset.h"
#include "data/lengths.h"
#include "data/prepare.h"
#include "data/synth.h"
#include "tokenize/byte_tokenizer.h"

namespace infinipipe::data {
namespace {

using test::ScratchDir;

PrepareOptions prepare_options(std::string input, std::string output, std::string key,
                               bool append_eod) {
  PrepareOptions o;
  o.input = std::move(input);
  o.output = std::move(output);
  o.json_keys = {std::move(key)};
  o.append_eod = append_eod;
  return o;
}

using testing::error_text;

TEST(ByteTokenizer, RoundTrip) {
  const std::string text = "h\xc3\xa9llo\n\x01\xff";
  const auto tokens = tokenize::byte_tokenize(text, true);
  EXPECT_EQ(tokens, (std::vector<int32_t>{'h', 0xc3, 0xa9, 'l', 'l', 'o', '\n', 1, 255,
                                          tokenize::kByteEod}));
  EXPECT_EQ(tokenize::byte_detokenize(tokens), text + "<eod>");
}

TEST(Prepare, TokenizesJsonLines) {
  ScratchDir dir;
  const std::string input = dir.file("in.jsonl");
  test::write_text(input,
                   "{\"text\": \"h\\u00e9llo\"}\n"
                   "{\"id\": 3, \"text\": \"a\\nb\"}\n"
                   "\n"
                   "{\"text\": \"\"}\n"
                   "{\"text\": \"last\", \"other\": [1, 2]}");  // no final newline
  PrepareOptions opt;
  opt.input = input;
  opt.output = dir.file("out");
  PrepareSummary s = prepare_jsonl(opt);
  EXPECT_EQ(s.documents, 3);
  EXPECT_EQ(s.skipped_blank_lines, 1);
  EXPECT_EQ(s.skipped_empty_documents, 1);
  EXPECT_EQ(s.tokens, 6 + 3 + 4);
  {
    const IndexedDataset ds = IndexedDataset::open(opt.output);
    EXPECT_EQ(ds.dtype(), TokenDType::uint16);
    ASSERT_EQ(ds.num_documents(), 3);
    EXPECT_EQ(ds.document_tokens(0), tokenize::byte_tokenize("h\xc3\xa9llo", false));
    EXPECT_EQ(ds.document_tokens(1), tokenize::byte_tokenize("a\nb", false));
    EXPECT_EQ(ds.document_tokens(2), tokenize::byte_tokenize("last", false));
  }
  opt.append_eod = true;
  s = prepare_jsonl(opt);  // overwrites the dataset atomically
  EXPECT_EQ(s.documents, 4);
  const IndexedDataset ds = IndexedDataset::open(opt.output);
  ASSERT_EQ(ds.num_documents(), 4);
  EXPECT_EQ(ds.document_tokens(2), std::vector<int32_t>{tokenize::kByteEod});
  EXPECT_EQ(ds.document_tokens(3), tokenize::byte_tokenize("last", true));
}

TEST(Prepare, OtherJsonKey) {
  ScratchDir dir;
  test::write_text(dir.file("in.jsonl"), "{\"content\": \"xy\"}\n");
  PrepareOptions opt = prepare_options(dir.file("in.jsonl"), dir.file("out"), "content", false);
  EXPECT_EQ(prepare_jsonl(opt).tokens, 2);
}

TEST(Prepare, BadLinesNameTheLineAndLeaveNoOutput) {
  ScratchDir dir;
  const std::string input = dir.file("in.jsonl");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"text\": \"ok\"\n", "not valid JSON"},
      {"[\"text\"]", "expected a JSON object"},
      {"{\"body\": \"x\"}", "no \"text\" field"},
      {"{\"text\": 17}", "is a number, not a string"},
  };
  for (const auto& [line, what] : cases) {
    test::write_text(input, "{\"text\": \"fine\"}\n\n" + line + "\n{\"text\": \"fine\"}\n");
    const std::string msg =
        error_text([&] { prepare_jsonl(prepare_options(input, dir.file("out"), "text", true)); });
    EXPECT_NE(msg.find(input + ":3:"), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_EQ(dir.list(), std::vector<std::string>{"in.jsonl"});
  }
  test::write_text(input, "\n{\"text\": \"\"}\n");
  EXPECT_NE(error_text([&] {
              prepare_jsonl(prepare_options(input, dir.file("out"), "text", false));
            }).find("no documents"),
            std::string::npos);
  EXPECT_NE(
      error_text([&] {
        prepare_jsonl(prepare_options(dir.file("nope.jsonl"), dir.file("out"), "text", false));
      }).find("cannot be read"),
      std::string::npos);
}

TEST(Synth, CorpusHasTheRequestedLengthsAndVocabulary) {
  ScratchDir dir;
  SynthOptions opt;
  opt.distribution = "github";
  opt.num_documents = 300;
  opt.seq_length = 8192;
  opt.seed = 5;
  opt.output = dir.file("syn");
  const SynthSummary s = synth_corpus_write(opt);
  const auto lengths = lengths_synthetic("github", 300, 8192, 5);
  const IndexedDataset ds = IndexedDataset::open(opt.output);
  ASSERT_EQ(ds.num_documents(), 300);
  EXPECT_EQ(s.documents, 300);
  EXPECT_EQ(s.tokens, ds.num_tokens());
  EXPECT_EQ(lengths_from_indexed(opt.output, 8192), lengths);
  for (int64_t d = 0; d < 300; ++d) {
    const auto tokens = ds.document_tokens(d);
    ASSERT_EQ(tokens.back(), tokenize::kByteEod);
    for (size_t i = 0; i + 1 < tokens.size(); ++i) ASSERT_LT(tokens[i], 256);
  }
  // Same seed, same bytes; another seed, another corpus.
  opt.output = dir.file("again");
  synth_corpus_write(opt);
  EXPECT_EQ(test::read_bytes(dir.file("syn.bin")), test::read_bytes(dir.file("again.bin")));
  opt.seed = 6;
  opt.output = dir.file("other");
  synth_corpus_write(opt);
  EXPECT_NE(test::read_bytes(dir.file("syn.bin")), test::read_bytes(dir.file("other.bin")));
}

// H(next token | previous token), in nats, estimated from counts.
double bigram_entropy(const std::vector<int32_t>& tokens) {
  std::map<std::pair<int32_t, int32_t>, int64_t> pair_counts;
  std::map<int32_t, int64_t> prev_counts;
  for (size_t i = 1; i < tokens.size(); ++i) {
    ++pair_counts[{tokens[i - 1], tokens[i]}];
    ++prev_counts[tokens[i - 1]];
  }
  double h = 0.0;
  const double n = static_cast<double>(tokens.size() - 1);
  for (const auto& [pair, c] : pair_counts) {
    const double p_pair = static_cast<double>(c) / n;
    h -= p_pair * std::log(static_cast<double>(c) / static_cast<double>(prev_counts[pair.first]));
  }
  return h;
}

TEST(Synth, TokensAreLearnable) {
  for (const uint64_t seed : {11, 12, 13}) {
    const SynthLanguage lang(seed);
    std::vector<int32_t> tokens;
    for (uint64_t d = 0; d < 30; ++d) {
      const auto doc = lang.document(8192, d);
      tokens.insert(tokens.end(), doc.begin(), doc.end());
    }
    // Even a bigram model beats uniform over 257 tokens (ln 257 = 5.55 nats) by far; for
    // comparison, English text has a character bigram entropy of about 2.3 nats.
    const double h = bigram_entropy(tokens);
    EXPECT_LT(h, 3.0) << "seed " << seed << ": bigram entropy " << h << " nats";
    EXPECT_GT(h, 0.5) << "seed " << seed << ": the corpus should not be trivially predictable";
  }
}

TEST(Synth, DocumentsRepeatDistantSpans) {
  const SynthLanguage lang(3);
  const auto doc = lang.document(20000, 1);
  ASSERT_EQ(doc.size(), 20000u);
  // A 128-token span is ~25 words (~30 nats of Markov entropy): it recurs only by copying.
  constexpr size_t kSpan = 128, kFar = 2000;
  std::unordered_map<std::string, size_t> first_seen;
  int distant_repeats = 0;
  for (size_t i = 0; i + kSpan < doc.size(); i += 1) {
    std::string key(reinterpret_cast<const char*>(doc.data() + i), kSpan * sizeof(int32_t));
    const auto [it, fresh] = first_seen.emplace(std::move(key), i);
    if (!fresh && i - it->second >= kFar) ++distant_repeats;
  }
  EXPECT_GT(distant_repeats, 0);
}

TEST(Synth, BadOptions) {
  ScratchDir dir;
  SynthOptions opt;
  opt.output = dir.file("x");
  opt.distribution = "books";
  EXPECT_THROW(synth_corpus_write(opt), ConfigError);
  opt.distribution = "fixed";
  opt.num_documents = 0;
  EXPECT_THROW(synth_corpus_write(opt), ConfigError);
  opt.num_documents = 3;
  opt.output = "";
  EXPECT_THROW(synth_corpus_write(opt), ConfigError);
  EXPECT_THROW(SynthLanguage(1).document(0, 1), Error);
  EXPECT_EQ(SynthLanguage(1).document(1, 1), std::vector<int32_t>{tokenize::kByteEod});
}

}  // namespace
}  // namespace infinipipe::data
