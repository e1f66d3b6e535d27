#include "data/lengths.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/input_file.h"
#include "data/indexed_dataset.h"
#include "data/rng.h"

namespace infinipipe::data {

namespace {

std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// A lognormal body mixed with a Pareto tail: real corpora have most documents short and a few
// very long ones holding a large share of the tokens (docs/data.md lists the shares).
struct LongTailShape {
  double body_median;
  double body_sigma;
  double tail_weight;
  double tail_min;
  double tail_alpha;
};
constexpr LongTailShape kGithub{1280.0, 1.05, 0.03, 16384.0, 1.1};
constexpr LongTailShape kCommonCrawl{768.0, 1.0, 0.012, 16384.0, 0.9};

int64_t sample_long_tail(const LongTailShape& shape, int64_t seq_length, Rng& rng) {
  double x = 0.0;
  if (rng.uniform() < shape.tail_weight) {
    const double u = 1.0 - rng.uniform();  // (0, 1]
    x = shape.tail_min * std::pow(u, -1.0 / shape.tail_alpha);
  } else {
    x = shape.body_median * std::exp(shape.body_sigma * rng.normal());
  }
  if (!(x < static_cast<double>(seq_length))) return seq_length;  // also catches inf
  return std::max<int64_t>(1, std::llround(x));
}

}  // namespace

std::vector<int64_t> lengths_from_text(const std::string& path) {
  input_file_check(path, input_kind::kLengths);
  std::ifstream in(path);
  if (!in) fail("cannot open lengths file {}: {}", path, std::strerror(errno));
  std::vector<int64_t> lengths;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    std::string_view s = line;
    if (const size_t hash = s.find('#'); hash != std::string_view::npos) s = s.substr(0, hash);
    s = trim(s);
    if (s.empty()) continue;
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v <= 0) {
      fail(
          "{}:{}: '{}' is not a sequence length; each line holds one positive integer "
          "(blank lines and '#' comments are allowed)",
          path, line_no, s);
    }
    lengths.push_back(v);
  }
  if (in.bad()) fail("cannot read lengths file {}", path);
  if (lengths.empty())
    fail("{} holds no sequence lengths; write one positive integer per line", path);
  return lengths;
}

std::vector<int64_t> lengths_from_indexed(const std::string& prefix, int64_t seq_length) {
  if (seq_length <= 0) fail_config("--seq-length must be positive, got {}", seq_length);
  const IndexedDataset ds = IndexedDataset::open(prefix);
  std::vector<int64_t> lengths(static_cast<size_t>(ds.num_documents()));
  for (int64_t d = 0; d < ds.num_documents(); ++d) {
    lengths[static_cast<size_t>(d)] = std::min(ds.document_length(d), seq_length);
  }
  return lengths;
}

std::vector<int64_t> lengths_synthetic(const std::string& distribution, int64_t count,
                                       int64_t seq_length, uint64_t seed) {
  if (count <= 0) fail_config("the number of sequences must be positive, got {}", count);
  if (seq_length <= 0) fail_config("--seq-length must be positive, got {}", seq_length);
  std::vector<int64_t> lengths(static_cast<size_t>(count));
  Rng rng(seed);
  if (distribution == "fixed") {
    std::fill(lengths.begin(), lengths.end(), seq_length);
  } else if (distribution == "uniform") {
    for (auto& len : lengths) len = rng.range(1, seq_length);
  } else if (distribution == "github" || distribution == "commoncrawl") {
    const LongTailShape& shape = distribution == "github" ? kGithub : kCommonCrawl;
    for (auto& len : lengths) len = sample_long_tail(shape, seq_length, rng);
  } else {
    fail_config("unknown length distribution '{}': choose github, commoncrawl, uniform or fixed",
                distribution);
  }
  return lengths;
}

}  // namespace infinipipe::data
