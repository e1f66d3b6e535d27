// The batches of a training run: its datasets, the training split's seeded order of global
// batches through the outlier delay (--outlier-delay), the data position a checkpoint saves, the
// share of a batch this rank's replica trains, and the batches of an evaluation.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "cost/cost_model.h"
#include "data/document_stream.h"
#include "data/outlier_delay.h"
#include "data/run_datasets.h"

namespace infinipipe::runtime {

// A global batch, or a replica's share of one: the documents that predict something (an empty
// document is left out), their lengths truncated to seq-length, and their tokens once read
// (empty until then).
struct Batch {
  std::vector<data::DocumentRef> documents;
  std::vector<int64_t> lengths;
  std::vector<std::vector<int32_t>> sequences;
};

// Where the training order stands: documents drawn from it, and with --outlier-delay the delay's
// documents drawn but not trained yet (data/outlier_delay_state.h; null without them).
struct DataPosition {
  int64_t consumed_samples = 0;
  nlohmann::json delay;
};

class RunBatches {
 public:
  // `cfg`: the run's (its stage layout set); `prior` prices sequences for the replica split and
  // the delay; `replica`: this rank's data-parallel replica.
  RunBatches(const Config& cfg, const cost::CostModel& prior, int64_t replica);

  // Before open(): the position the run starts from (a checkpoint's; the start otherwise).
  void position_set(const DataPosition& at);
  // Opens the datasets and the training order at that position (when there is training to do).
  void open();
  bool opened() const { return stream_.has_value(); }
  DataPosition position() const;
  int64_t consumed_samples() const;
  // --outlier-delay: documents drawn from the order and not trained yet (queued outliers and
  // the lookahead); 0 without the delay.
  int64_t delayed_documents() const;

  // The next global batch of the training order, lengths only; Error if it predicts no token.
  Batch next(int64_t iteration);
  // The batch next() will give, lengths only, without drawing it (for the background planner: a
  // checkpoint saves the position of the batches trained).
  Batch peek() const;
  // This rank's replica's share of `batch`, in the order the replica split gives (all of it with
  // dp = 1); the sequences come along when they were read.
  Batch share(const Batch& batch) const;
  void tokens_read(Batch& batch, data::DataSplit split = data::DataSplit::train) const;

  // The run has `split` data and evaluates (--eval-iters > 0).
  bool evaluates(data::DataSplit split) const;
  // The global batches of evaluation `index` on `split`: the validation split continues where
  // the last evaluation stopped (index × eval-iters batches in), the test split starts at its
  // beginning.
  data::DocumentStream eval_stream(data::DataSplit split, int64_t index) const;
  // One sequence per document of `split` that predicts something, truncated to seq-length.
  Batch lengths_read(std::span<const data::DocumentRef> documents, data::DataSplit split) const;

 private:
  // The next global batch's documents from `stream`, through `delay` when --outlier-delay is on.
  std::vector<data::DocumentRef> documents_next(data::DocumentStream& stream,
                                                std::optional<data::OutlierDelay>& delay) const;
  int64_t document_length(const data::DocumentRef& doc) const;  // training split, truncated

  Config cfg_;
  cost::CostModel prior_;
  int64_t replica_ = 0;
  std::optional<data::RunDatasets> datasets_;
  std::optional<data::DocumentStream> stream_;  // the training split's global batches
  std::optional<data::OutlierDelay> delay_;     // --outlier-delay: its queue and lookahead
  DataPosition start_;                          // until open()
};

}  // namespace infinipipe::runtime
