// The Trainer's batches: which documents form the next global batch, their lengths and tokens,
// and the share of them this rank's replica trains.
#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/outlier_delay_state.h"
#include "data/training_batches.h"
#include "plan/replica_balance.h"
#include "runtime/dist_step.h"
#include "runtime/train.h"

namespace infinipipe::runtime {

// One sequence per document, truncated to seq-length; an empty document predicts nothing.
Trainer::Batch Trainer::batch_lengths_read(std::span<const data::DocumentRef> documents,
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

void Trainer::batch_tokens_read(Batch& batch, data::DataSplit split) const {
  batch.sequences.clear();
  for (size_t i = 0; i < batch.documents.size(); ++i) {
    batch.sequences.push_back(
        datasets_->document_tokens(split, batch.documents[i], batch.lengths[i]));
  }
}

std::vector<data::DocumentRef> Trainer::documents_next(
    data::DocumentStream& stream, std::optional<data::OutlierDelay>& delay) const {
  data::OutlierDelay* through = cfg_.parallel.outlier_delay ? &*delay : nullptr;
  const data::OutlierDelay::Batch b = data::batch_documents_draw(
      stream, through, [this](const data::DocumentRef& doc) { return document_length(doc); });
  std::vector<data::DocumentRef> out;
  for (const data::DelayedDocument& d : b.documents) out.push_back(d.ref);
  return out;
}

int64_t Trainer::document_length(const data::DocumentRef& doc) const {
  return std::min(datasets_->document_length(data::DataSplit::train, doc), cfg_.model.seq_length);
}

// The delay's saved form is data/outlier_delay_state.h's (train --pp auto restores it too).
nlohmann::json Trainer::delay_state() const {
  return delay_ ? data::outlier_delay_state(*delay_) : start_delay_;
}

void Trainer::delay_restore(const nlohmann::json& state) {
  if (cfg_.parallel.outlier_delay)
    delay_.emplace(cfg_.training.global_batch_size, cfg_.parallel.data_parallel,
                   plan::replica_split_cost_fn(cfg_, cm_));
  data::outlier_delay_restore(
      delay_ ? &*delay_ : nullptr, state,
      [this](const data::DocumentRef& doc) { return document_length(doc); });
}

// The sampler's next global batch, lengths only; Error if it predicts no token.
Trainer::Batch Trainer::batch_next(int64_t iteration) {
  Batch batch = batch_lengths_read(documents_next(*stream_, delay_));
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

// This rank's replica's share of a global batch, in the order the replica split gives: all of it
// in one process or with dp = 1. Sequences come along when they were read.
Trainer::Batch Trainer::replica_share(const Batch& batch) const {
  if (!groups_ || groups_->layout().dp == 1) return batch;
  const auto split = dist_replica_split(batch.lengths, groups_->layout().dp, cm_, cfg_);
  Batch share;
  for (int32_t i : split[static_cast<size_t>(groups_->layout().replica)]) {
    const size_t k = static_cast<size_t>(i);
    share.documents.push_back(batch.documents[k]);
    share.lengths.push_back(batch.lengths[k]);
    if (!batch.sequences.empty()) share.sequences.push_back(batch.sequences[k]);
  }
  return share;
}

}  // namespace infinipipe::runtime
