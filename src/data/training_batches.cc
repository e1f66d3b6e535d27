#include "data/training_batches.h"

#include <algorithm>
#include <utility>

#include "data/outlier_delay_state.h"

namespace infinipipe::data {

OutlierDelay::Batch batch_documents_draw(DocumentStream& stream, OutlierDelay* delay,
                                         const std::function<int64_t(const DocumentRef&)>& length) {
  if (delay != nullptr) {
    const OutlierDelay::Source source = [&stream, &length] {
      const DocumentStream::Drawn d = stream.draw();
      return DelayedDocument{d.ref, length(d.ref), d.epoch};
    };
    return delay->next(source);
  }
  OutlierDelay::Batch b;
  for (const DocumentRef& ref : stream.next()) b.documents.push_back({ref, length(ref), 0});
  return b;
}

TrainingBatches::TrainingBatches(const DataFlags& flags, int64_t global_batch_size, uint64_t seed,
                                 int64_t seq_length)
    : sets_(RunDatasets::open(flags)),
      stream_(sets_.stream(DataSplit::train, global_batch_size, seed)),
      seq_length_(seq_length) {}

void TrainingBatches::delay_outliers(int64_t replicas, OutlierDelay::Cost cost) {
  delay_.emplace(stream_.global_batch_size(), replicas, std::move(cost));
}

void TrainingBatches::resume(int64_t consumed_samples, const nlohmann::json& delay_state) {
  stream_.set_consumed_samples(consumed_samples);
  outlier_delay_restore(delay_ ? &*delay_ : nullptr, delay_state,
                        [this](const DocumentRef& r) { return length(r); });
}

TrainingBatches::Batch TrainingBatches::next() {
  Batch b;
  b.drawn = batch_documents_draw(stream_, delay_ ? &*delay_ : nullptr,
                                 [this](const DocumentRef& r) { return length(r); });
  for (const DelayedDocument& d : b.drawn.documents)
    if (d.length > 0) b.lengths.push_back(d.length);  // an empty document is no sequence
  return b;
}

std::vector<std::vector<int32_t>> TrainingBatches::tokens(const Batch& batch) const {
  std::vector<std::vector<int32_t>> out;
  for (const DelayedDocument& d : batch.drawn.documents)
    if (d.length > 0) out.push_back(sets_.document_tokens(DataSplit::train, d.ref, d.length));
  return out;
}

nlohmann::json TrainingBatches::delay_state() const {
  return delay_ ? outlier_delay_state(*delay_) : nlohmann::json();
}

int64_t TrainingBatches::length(const DocumentRef& doc) const {
  return std::min(sets_.document_length(DataSplit::train, doc), seq_length_);
}

int64_t TrainingBatches::waiting() const {
  return delay_ ? static_cast<int64_t>(delay_->queue().size()) : 0;
}

}  // namespace infinipipe::data
