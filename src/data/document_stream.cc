#include "data/document_stream.h"

#include <algorithm>

#include "core/error.h"

namespace infinipipe::data {

namespace {

// Dataset 0 keeps the run's seed, so a single dataset orders its documents as BatchSampler did;
// the others get seeds far from seed + epoch of dataset 0.
uint64_t source_seed(uint64_t seed, size_t dataset) {
  return seed + static_cast<uint64_t>(dataset) * 0x9E3779B97F4A7C15ull;
}

}  // namespace

std::pair<int64_t, int64_t> DocumentPieces::at(int64_t i) const {
  if (i < 0 || i >= samples()) fail("internal: piece {} of {}", i, samples());
  const auto it = std::upper_bound(first.begin(), first.end(), i);
  const int64_t doc = (it - first.begin()) - 1;
  return {doc, (i - first[static_cast<size_t>(doc)]) * length};
}

DocumentStream::DocumentStream(std::vector<DocRange> ranges, std::vector<double> weights,
                               int64_t global_batch_size, uint64_t seed,
                               std::vector<std::shared_ptr<const DocumentPieces>> pieces)
    : cursor_(weights), global_batch_size_(global_batch_size) {
  if (!pieces.empty() && pieces.size() != ranges.size()) {
    fail("document stream: {} dataset ranges but {} piece tables", ranges.size(), pieces.size());
  }
  if (global_batch_size <= 0) {
    fail_config("--global-batch-size must be positive, got {}", global_batch_size);
  }
  if (ranges.size() != weights.size()) {
    fail("document stream: {} dataset ranges but {} weights", ranges.size(), weights.size());
  }
  for (size_t d = 0; d < ranges.size(); ++d) {
    if (weights[d] > 0 && ranges[d].size() <= 0) {
      fail_config(
          "dataset {} of --data-path has weight {:.3g} but no documents in this split; give it "
          "weight 0, or change --split so the split holds some of its documents",
          d + 1, weights[d]);
    }
    // A dataset of weight 0 is never drawn; its sampler needs one document to exist.
    std::shared_ptr<const DocumentPieces> p = pieces.empty() ? nullptr : pieces[d];
    const int64_t n = std::max<int64_t>(p ? p->samples() : ranges[d].size(), 1);
    sources_.push_back({ranges[d], BatchSampler(n, 1, source_seed(seed, d)), std::move(p)});
  }
}

std::vector<DocumentRef> DocumentStream::next() {
  std::vector<DocumentRef> batch;
  batch.reserve(static_cast<size_t>(global_batch_size_));
  for (int64_t i = 0; i < global_batch_size_; ++i) batch.push_back(draw().ref);
  return batch;
}

DocumentStream::Drawn DocumentStream::draw() {
  const int32_t d = cursor_.next();
  Source& s = sources_[static_cast<size_t>(d)];
  const int64_t epoch = s.order.epoch();
  const int64_t i = s.order.next().front();
  if (!s.pieces) return {{d, s.range.begin + i, 0}, epoch};
  const auto [doc, start] = s.pieces->at(i);
  return {{d, s.range.begin + doc, start}, epoch};
}

void DocumentStream::set_consumed_samples(int64_t consumed) {
  // BatchSampler's bound, checked before the blend replays that many samples.
  constexpr int64_t kMaxConsumed = int64_t{1} << 53;
  if (consumed < 0 || consumed > kMaxConsumed) {
    fail("consumed_samples {} is outside [0, 2^53]; the checkpoint that supplied it is damaged",
         consumed);
  }
  cursor_.set_consumed(consumed);
  for (size_t d = 0; d < sources_.size(); ++d) {
    sources_[d].order.set_consumed_samples(cursor_.taken()[d]);
  }
}

}  // namespace infinipipe::data
