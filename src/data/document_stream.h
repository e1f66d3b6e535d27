// The documents of successive global batches, drawn from one split (train / validation / test)
// of one or several datasets blended by weight. Each dataset's documents of the split are
// visited in a seeded shuffle, reshuffled every epoch of that dataset (BatchSampler's order, so
// one dataset with the whole split gives exactly BatchSampler's batches); which dataset each
// sample comes from follows BlendCursor. The whole state is consumed_samples, as in Megatron-LM,
// so a checkpoint that stores it resumes the exact same order.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "data/batch_sampler.h"
#include "data/blend.h"
#include "data/split.h"

namespace infinipipe::data {

struct DocumentRef {
  int32_t dataset = 0;   // index into the blend
  int64_t document = 0;  // document id inside that dataset
  int64_t start = 0;     // the sample's first token in the document (--long-documents split)
  bool operator==(const DocumentRef&) const = default;
};

// --long-documents split: the samples of one dataset's documents in a split, a document of n
// tokens giving ceil(n / length) consecutive ones (an empty document one, as it gives one
// sample otherwise). first[i] is the first sample of the range's document i; first.back() the
// count.
struct DocumentPieces {
  int64_t length = 0;
  std::vector<int64_t> first;
  int64_t samples() const { return first.empty() ? 0 : first.back(); }
  // Sample `i` (0 <= i < samples()) as (document index in the range, first token).
  std::pair<int64_t, int64_t> at(int64_t i) const;
};

class DocumentStream {
 public:
  // ranges[d]: dataset d's documents of this split; weights: normalised, one per dataset (a
  // dataset of weight > 0 needs at least one document: ConfigError naming it otherwise).
  // With `pieces` (one per dataset, --long-documents split) a sample is a piece of a document:
  // the shuffle runs over the pieces.
  DocumentStream(std::vector<DocRange> ranges, std::vector<double> weights,
                 int64_t global_batch_size, uint64_t seed,
                 std::vector<std::shared_ptr<const DocumentPieces>> pieces = {});

  std::vector<DocumentRef> next();  // the next global batch

  // One document at a time (next() is global_batch_size of these), with the epoch of its
  // dataset it belongs to (its pass over the split), which the outlier delay needs.
  struct Drawn {
    DocumentRef ref;
    int64_t epoch = 0;
  };
  Drawn draw();

  int64_t consumed_samples() const { return cursor_.consumed(); }
  void set_consumed_samples(int64_t consumed);
  int64_t global_batch_size() const { return global_batch_size_; }
  // Samples each dataset has given so far (the blend's realised shares).
  const std::vector<int64_t>& taken() const { return cursor_.taken(); }

 private:
  struct Source {
    DocRange range;
    BatchSampler order;  // one sample at a time over the range's documents (or pieces)
    std::shared_ptr<const DocumentPieces> pieces;
  };
  std::vector<Source> sources_;
  BlendCursor cursor_;
  int64_t global_batch_size_;
};

}  // namespace infinipipe::data
