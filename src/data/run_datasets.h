// The datasets of a training run as Megatron-LM's flags give them: `--data-path` (one PREFIX or a
// weighted blend) cut into train / validation / test by `--split`, or one blend per split
// (`--train-data-path`, `--valid-data-path`, `--test-data-path`, each used whole). Every prefix
// is opened once; each split hands out its global batches through a DocumentStream.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "data/document_stream.h"
#include "data/indexed_dataset.h"
#include "data/split.h"

namespace infinipipe::data {

// The data flags, as text (blends are space-separated words, data/blend.h).
struct DataFlags {
  std::string data_path;
  std::string split = "100,0,0";
  std::string train_data_path, valid_data_path, test_data_path;
  // --long-documents split: a document longer than this becomes consecutive samples of at most
  // this many tokens; 0: one sample per document (truncated by whoever reads it).
  int64_t piece_length = 0;
};

// The data flags of a run's configuration (--long-documents split: pieces of --seq-length).
DataFlags data_flags(const Config& cfg);

// One split of the run: its datasets (indices into RunDatasets' prefixes), their document
// ranges and normalised weights, and with --long-documents split their pieces.
struct SplitBlend {
  std::vector<int32_t> datasets;
  std::vector<DocRange> ranges;
  std::vector<double> weights;
  std::vector<std::shared_ptr<const DocumentPieces>> pieces;  // empty: a document per sample
  int64_t documents() const;
  int64_t samples() const;  // documents, or with pieces the pieces
};

// What cutting a split's documents at a length drops: its documents and tokens, those longer
// than the length, and the tokens past it (share: of the tokens a blend's draws hold, each
// dataset weighed as the blend draws it).
struct Truncation {
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t long_documents = 0;
  int64_t dropped_tokens = 0;
  double dropped_share = 0.0;
};

class RunDatasets {
 public:
  // Opens every prefix (Error naming a missing or damaged one); ConfigError for bad blend or
  // split syntax.
  static RunDatasets open(const DataFlags& flags);

  // The split has documents to draw from.
  bool has(DataSplit s) const { return split(s).documents() > 0; }
  const SplitBlend& split(DataSplit s) const { return splits_[static_cast<size_t>(s)]; }
  // Its global batches, seeded per split (the train split keeps `seed`, so one dataset with all
  // documents in train orders them exactly as BatchSampler(num_documents, gbs, seed)).
  // ConfigError when the split has no documents, or a weighted dataset has none in it.
  DocumentStream stream(DataSplit s, int64_t global_batch_size, uint64_t seed) const;
  // A sample of a stream of split `s`: its document's length from the sample's start (the whole
  // document without --long-documents split), and its first max_len tokens from there.
  int64_t document_length(DataSplit s, const DocumentRef& ref) const;
  std::vector<int32_t> document_tokens(DataSplit s, const DocumentRef& ref, int64_t max_len) const;
  const std::vector<std::string>& prefixes() const { return prefixes_; }
  const IndexedDataset& dataset(int32_t i) const { return datasets_[static_cast<size_t>(i)]; }
  // One line per split that has data: its documents per dataset and their weights.
  std::string describe() const;
  // What cutting split `s`'s documents at `length` tokens drops.
  Truncation truncation(DataSplit s, int64_t length) const;

 private:
  int32_t prefix_open(const std::string& prefix);
  const IndexedDataset& source(DataSplit s, const DocumentRef& ref) const;

  std::vector<std::string> prefixes_;
  std::vector<IndexedDataset> datasets_;
  std::array<SplitBlend, 3> splits_;
};

// The warning a truncating run (and `data stats`) gives: how much cutting `what` ("the training
// split") at `length` drops, and how to keep it; "" when nothing is dropped.
std::string truncation_warning(const Truncation& t, int64_t length, const std::string& what);

// What a training run of `cfg` says once before it starts: the truncation warning of its
// training split, or with --long-documents split how many samples its documents became; "" when
// there is nothing to say (no data, nothing truncated).
std::string run_samples_message(const Config& cfg);

// The words of a blend flag ("0.3 A 0.7 B"), split at white space.
std::vector<std::string> blend_words(const std::string& text);

}  // namespace infinipipe::data
