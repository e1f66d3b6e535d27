#include "data/run_datasets.h"

#include <algorithm>

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

// An unweighted blend weighs each dataset by its samples in the split (as if concatenated).
void weights_fill(SplitBlend& sb, const std::vector<BlendEntry>& blend) {
  if (!blend_unweighted(blend)) {
    for (const BlendEntry& e : blend) sb.weights.push_back(e.weight);
    return;
  }
  std::vector<int64_t> counts;
  for (size_t i = 0; i < sb.ranges.size(); ++i)
    counts.push_back(sb.pieces.empty() ? sb.ranges[i].size() : sb.pieces[i]->samples());
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  if (total == 0) {
    sb.weights.assign(counts.size(), 0.0);
    return;
  }
  sb.weights = blend_weights_from_counts(counts);
}

}  // namespace

DataFlags data_flags(const Config& cfg) {
  const TrainingConfig& t = cfg.training;
  return {t.data_path,       t.split,
          t.train_data_path, t.valid_data_path,
          t.test_data_path,  t.long_documents == LongDocuments::split ? cfg.model.seq_length : 0};
}

std::string truncation_warning(const Truncation& t, int64_t length, const std::string& what) {
  if (t.dropped_tokens == 0) return "";
  return fmt::format(
      "warning: --seq-length {} truncates {} of {}'s {} documents: {:.1f}% of its tokens ({} of "
      "{}) are never trained on. A sample here is one document cut at --seq-length (the "
      "InfiniPipe paper's protocol; Megatron-LM concatenates documents and drops none). To keep "
      "them give --long-documents split (a long document becomes consecutive samples of at most "
      "{} tokens, positions restarting in each) or a larger --seq-length",
      length, t.long_documents, what, t.documents, 100.0 * t.dropped_share, t.dropped_tokens,
      t.tokens, length);
}

std::string run_samples_message(const Config& cfg) {
  const TrainingConfig& t = cfg.training;
  if (t.train_iters <= 0 || !t.has_data()) return "";
  const RunDatasets sets = RunDatasets::open(data_flags(cfg));
  if (!sets.has(DataSplit::train)) return "";  // the run's own error names it
  const int64_t seq = cfg.model.seq_length;
  const Truncation cut = sets.truncation(DataSplit::train, seq);
  if (t.long_documents == LongDocuments::truncate)
    return truncation_warning(cut, seq, "the training split");
  if (cut.long_documents == 0) return "";
  return fmt::format(
      "note: --long-documents split: the training split's {} documents are {} samples of at most "
      "{} tokens ({} documents longer than --seq-length split); --global-batch-size and "
      "--train-samples count these samples",
      cut.documents, sets.split(DataSplit::train).samples(), seq, cut.long_documents);
}

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

int64_t SplitBlend::samples() const {
  if (pieces.empty()) return documents();
  int64_t n = 0;
  for (const auto& p : pieces) n += p->samples();
  return n;
}

namespace {

// The pieces of a dataset's documents in `range`, `length` tokens at most each.
std::shared_ptr<const DocumentPieces> pieces_of(const IndexedDataset& ds, DocRange range,
                                                int64_t length) {
  auto p = std::make_shared<DocumentPieces>();
  p->length = length;
  p->first.reserve(static_cast<size_t>(range.size() + 1));
  int64_t n = 0;
  for (int64_t d = range.begin; d < range.end; ++d) {
    p->first.push_back(n);
    n += std::max<int64_t>(1, (ds.document_length(d) + length - 1) / length);
  }
  p->first.push_back(n);
  return p;
}

}  // namespace

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
        if (flags.piece_length > 0)
          sb.pieces.push_back(pieces_of(rd.datasets_[d], sb.ranges.back(), flags.piece_length));
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
      if (flags.piece_length > 0)
        sb.pieces.push_back(pieces_of(rd.datasets_[d], sb.ranges.back(), flags.piece_length));
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
  return DocumentStream(sb.ranges, sb.weights, global_batch_size, split_seed(seed, s), sb.pieces);
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
  return std::max<int64_t>(source(s, ref).document_length(ref.document) - ref.start, 0);
}

std::vector<int32_t> RunDatasets::document_tokens(DataSplit s, const DocumentRef& ref,
                                                  int64_t max_len) const {
  return source(s, ref).document_tokens(ref.document, max_len, ref.start);
}

Truncation RunDatasets::truncation(DataSplit s, int64_t length) const {
  const SplitBlend& sb = split(s);
  Truncation t;
  double drawn = 0, dropped = 0;  // per draw: a dataset's mean tokens times its weight
  for (size_t i = 0; i < sb.datasets.size(); ++i) {
    const IndexedDataset& ds = datasets_[static_cast<size_t>(sb.datasets[i])];
    int64_t tokens = 0, cut = 0;
    for (int64_t d = sb.ranges[i].begin; d < sb.ranges[i].end; ++d) {
      const int64_t n = ds.document_length(d);
      tokens += n;
      if (n > length) {
        cut += n - length;
        ++t.long_documents;
      }
    }
    t.documents += sb.ranges[i].size();
    t.tokens += tokens;
    t.dropped_tokens += cut;
    if (sb.ranges[i].size() > 0) {
      const double w = sb.weights[i] / static_cast<double>(sb.ranges[i].size());
      drawn += w * static_cast<double>(tokens);
      dropped += w * static_cast<double>(cut);
    }
  }
  t.dropped_share = drawn > 0 ? dropped / drawn : 0.0;
  return t;
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
