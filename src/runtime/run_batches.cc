#include "runtime/run_batches.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "data/outlier_delay_state.h"
#include "data/training_batches.h"
#include "plan/replica_price.h"
#include "runtime/data_tokenizer_check.h"
#include "runtime/dist_step.h"
#include "runtime/executor.h"

namespace infinipipe::runtime {

RunBatches::RunBatches(const Config& cfg, const cost::CostModel& prior, int64_t replica)
    : cfg_(cfg), prior_(prior), replica_(replica) {}

void RunBatches::position_set(const DataPosition& at) {
  start_ = at;
}

// The datasets and the training order at the position the run starts from; the delay's saved
// form is data/outlier_delay_state.h's (train --pp auto restores it too).
void RunBatches::open() {
  const TrainingConfig& t = cfg_.training;
  datasets_.emplace(data::RunDatasets::open(data::data_flags(cfg_)));
  data_tokenizer_check(t, datasets_->prefixes());
  stream_.emplace(datasets_->stream(data::DataSplit::train, t.global_batch_size,
                                    static_cast<uint64_t>(t.seed)));
  stream_->set_consumed_samples(start_.consumed_samples);
  if (cfg_.parallel.outlier_delay)
    delay_.emplace(t.global_batch_size, cfg_.parallel.data_parallel,
                   plan::replica_split_cost_fn(cfg_, prior_));
  data::outlier_delay_restore(
      delay_ ? &*delay_ : nullptr, start_.delay,
      [this](const data::DocumentRef& doc) { return document_length(doc); });
}

DataPosition RunBatches::position() const {
  if (!stream_) return start_;
  return {stream_->consumed_samples(), delay_ ? data::outlier_delay_state(*delay_) : start_.delay};
}

int64_t RunBatches::consumed_samples() const {
  return stream_ ? stream_->consumed_samples() : start_.consumed_samples;
}

int64_t RunBatches::delayed_documents() const {
  return delay_ ? static_cast<int64_t>(delay_->queue().size() + delay_->lookahead().size()) : 0;
}

// One sequence per document, truncated to seq-length; an empty document predicts nothing.
Batch RunBatches::lengths_read(std::span<const data::DocumentRef> documents,
                               data::DataSplit split) const {
  Batch batch;
  for (const data::DocumentRef& doc : documents) {
    const int64_t n = std::min(datasets_->document_length(split, doc), cfg_.model.seq_length);
    if (n == 0) continue;
    batch.documents.push_back(doc);
    batch.lengths.push_back(n);
  }
  return batch;
}

void RunBatches::tokens_read(Batch& batch, data::DataSplit split) const {
  batch.sequences.clear();
  for (size_t i = 0; i < batch.documents.size(); ++i) {
    batch.sequences.push_back(
        datasets_->document_tokens(split, batch.documents[i], batch.lengths[i]));
  }
}

std::vector<data::DocumentRef> RunBatches::documents_next(
    data::DocumentStream& stream, std::optional<data::OutlierDelay>& delay) const {
  data::OutlierDelay* through = cfg_.parallel.outlier_delay ? &*delay : nullptr;
  const data::OutlierDelay::Batch b = data::batch_documents_draw(
      stream, through, [this](const data::DocumentRef& doc) { return document_length(doc); });
  std::vector<data::DocumentRef> out;
  for (const data::DelayedDocument& d : b.documents) out.push_back(d.ref);
  return out;
}

int64_t RunBatches::document_length(const data::DocumentRef& doc) const {
  return std::min(datasets_->document_length(data::DataSplit::train, doc), cfg_.model.seq_length);
}

Batch RunBatches::next(int64_t iteration) {
  Batch batch = lengths_read(documents_next(*stream_, delay_), data::DataSplit::train);
  if (batch_predicted_tokens(batch.lengths) == 0) {
    fail(
        "iteration {}: the global batch (documents {}..{} of the data order) predicts no token "
        "(every document has at most one token); check --data-path {}",
        iteration, stream_->consumed_samples() - cfg_.training.global_batch_size,
        stream_->consumed_samples() - 1,
        cfg_.training.data_path.empty() ? cfg_.training.train_data_path : cfg_.training.data_path);
  }
  return batch;
}

// Copies of the sampler and the delay look ahead.
Batch RunBatches::peek() const {
  data::DocumentStream stream = *stream_;
  std::optional<data::OutlierDelay> delay = delay_;
  return lengths_read(documents_next(stream, delay), data::DataSplit::train);
}

Batch RunBatches::share(const Batch& batch) const {
  const int64_t dp = cfg_.parallel.data_parallel;
  if (dp == 1) return batch;
  const auto split = dist_replica_split(batch.lengths, dp, prior_, cfg_);
  Batch out;
  for (int32_t i : split[static_cast<size_t>(replica_)]) {
    const size_t k = static_cast<size_t>(i);
    out.documents.push_back(batch.documents[k]);
    out.lengths.push_back(batch.lengths[k]);
    if (!batch.sequences.empty()) out.sequences.push_back(batch.sequences[k]);
  }
  return out;
}

bool RunBatches::evaluates(data::DataSplit split) const {
  return cfg_.training.eval_iters > 0 && datasets_ && datasets_->has(split);
}

data::DocumentStream RunBatches::eval_stream(data::DataSplit split, int64_t index) const {
  const TrainingConfig& t = cfg_.training;
  data::DocumentStream stream =
      datasets_->stream(split, t.global_batch_size, static_cast<uint64_t>(t.seed));
  if (split == data::DataSplit::valid)
    stream.set_consumed_samples(index * t.eval_iters * t.global_batch_size);
  return stream;
}

}  // namespace infinipipe::runtime
