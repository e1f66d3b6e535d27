#include "data/run_datasets.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/blend.h"

namespace infinipipe::data {

namespace {

// The validation and test orders are seeded apart from the training order (which keeps the
// run's seed) so that two splits of one dataset never share a shuffle.
uint64_t split_seed(uint64_t seed, DataSplit s) {
  return seed + static_cast<uint64_t>(s) * 0xD1B54A32D192ED03ull;
}

// An unweighted blend weighs each dataset by its documents in the split (as if concatenated).
void weights_fill(SplitBlend& sb, const std::vector<BlendEntry>& blend) {
  if (!blend_unweighted(blend)) {
    for (const BlendEntry& e : blend) sb.weights.push_back(e.weight);
    return;
  }
  std::vector<int64_t> counts;
  for (const DocRange& r : sb.ranges) counts.push_back(r.size());
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  if (total == 0) {
    sb.weights.assign(counts.size(), 0.0);
    return;
  }
  sb.weights = blend_weights_from_counts(counts);
}

}  // namespace

std::vector<std::string> blend_words(const std::string& text) {
  std::vector<std::string> words;
  std::string cur;
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!cur.empty()) words.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) words.push_back(cur);
  return words;
}

int64_t SplitBlend::documents() const {
  int64_t n = 0;
  for (const DocRange& r : ranges) n += r.size();
  return n;
}

int32_t RunDatasets::prefix_open(const std::string& prefix) {
  for (size_t i = 0; i < prefixes_.size(); ++i) {
    if (prefixes_[i] == prefix) return static_cast<int32_t>(i);
  }
  datasets_.push_back(IndexedDataset::open(prefix));
  prefixes_.push_back(prefix);
  return static_cast<int32_t>(prefixes_.size() - 1);
}

RunDatasets RunDatasets::open(const DataFlags& flags) {
  RunDatasets rd;
  if (!flags.data_path.empty()) {
    const std::vector<std::string> words = blend_words(flags.data_path);
    const std::vector<BlendEntry> blend = blend_parse(words);
    const std::array<double, 3> weights = split_parse(flags.split);
    for (size_t s = 0; s < 3; ++s) {
      if (weights[s] == 0) continue;  // a split with no share has no data
      SplitBlend& sb = rd.splits_[s];
      for (const BlendEntry& e : blend) {
        const int32_t d = rd.prefix_open(e.prefix);
        sb.datasets.push_back(d);
        sb.ranges.push_back(split_ranges(rd.datasets_[d].num_documents(), weights)[s]);
      }
      weights_fill(sb, blend);
    }
    return rd;
  }
  const std::array<const std::string*, 3> paths = {&flags.train_data_path, &flags.valid_data_path,
                                                   &flags.test_data_path};
  for (size_t s = 0; s < 3; ++s) {
    if (paths[s]->empty()) continue;
    const std::vector<std::string> words = blend_words(*paths[s]);
    const std::vector<BlendEntry> blend = blend_parse(words);
    SplitBlend& sb = rd.splits_[s];
    for (const BlendEntry& e : blend) {
      const int32_t d = rd.prefix_open(e.prefix);
      sb.datasets.push_back(d);
      sb.ranges.push_back({0, rd.datasets_[d].num_documents()});
    }
    weights_fill(sb, blend);
  }
  return rd;
}

DocumentStream RunDatasets::stream(DataSplit s, int64_t global_batch_size, uint64_t seed) const {
  const SplitBlend& sb = split(s);
  if (sb.documents() == 0) {
    fail_config(
        "the {} split has no documents: give --split a {} share (e.g. 969,30,1) or a "
        "--{}-data-path",
        data_split_name(s), data_split_name(s),
        s == DataSplit::train   ? "train"
        : s == DataSplit::valid ? "valid"
                                : "test");
  }
  return DocumentStream(sb.ranges, sb.weights, global_batch_size, split_seed(seed, s));
}

const IndexedDataset& RunDatasets::source(DataSplit s, const DocumentRef& ref) const {
  const SplitBlend& sb = split(s);
  if (ref.dataset < 0 || static_cast<size_t>(ref.dataset) >= sb.datasets.size()) {
    fail("internal: document of dataset {} in a {} blend of {}", ref.dataset, data_split_name(s),
         sb.datasets.size());
  }
  return datasets_[static_cast<size_t>(sb.datasets[static_cast<size_t>(ref.dataset)])];
}

int64_t RunDatasets::document_length(DataSplit s, const DocumentRef& ref) const {
  return source(s, ref).document_length(ref.document);
}

std::vector<int32_t> RunDatasets::document_tokens(DataSplit s, const DocumentRef& ref,
                                                  int64_t max_len) const {
  return source(s, ref).document_tokens(ref.document, max_len);
}

std::string RunDatasets::describe() const {
  std::string out;
  for (DataSplit s : {DataSplit::train, DataSplit::valid, DataSplit::test}) {
    const SplitBlend& sb = split(s);
    if (sb.documents() == 0) continue;
    std::string parts;
    for (size_t i = 0; i < sb.datasets.size(); ++i) {
      parts += fmt::format("{}{} documents of {} (weight {:.3g})", parts.empty() ? "" : ", ",
                           sb.ranges[i].size(), prefixes_[static_cast<size_t>(sb.datasets[i])],
                           sb.weights[i]);
    }
    out += fmt::format("{}: {}\n", data_split_name(s), parts);
  }
  return out;
}

}  // namespace infinipipe::data
