// The training split's global batches exactly as `train` draws them: the seeded, blended
// DocumentStream of the run's datasets (run_datasets.h), through the outlier delay when it is on
// (outlier_delay.h), one sequence per non-empty document truncated to seq-length. The trainer
// draws with batch_documents_draw; `plan` and `simulate` with data flags read whole batches with
// TrainingBatches, so their --iteration I is train's batch I; `train --pp auto` samples its layout
// search's batches with it, from a resumed run's position too.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/document_stream.h"
#include "data/outlier_delay.h"
#include "data/run_datasets.h"

namespace infinipipe::data {

// The next global batch's documents from `stream`: its next global_batch_size, or with `delay`
// the delay's batch over the stream drawn one document at a time. `length` gives a document's
// trained length (truncated to seq-length), which the delay weighs.
OutlierDelay::Batch batch_documents_draw(DocumentStream& stream, OutlierDelay* delay,
                                         const std::function<int64_t(const DocumentRef&)>& length);

class TrainingBatches {
 public:
  // Opens the datasets of `flags` (Error naming a missing one; ConfigError for bad flags) and
  // starts at the first batch of the training split's order for `seed`.
  TrainingBatches(const DataFlags& flags, int64_t global_batch_size, uint64_t seed,
                  int64_t seq_length);
  // From now on batches go through the outlier delay over `replicas` (as --outlier-delay).
  void delay_outliers(int64_t replicas, OutlierDelay::Cost cost);
  // Continues where a checkpoint left the run: after `consumed_samples` documents of the order,
  // with the delay's saved documents (outlier_delay_state.h; after delay_outliers when the run
  // delays, ConfigError when the state holds documents and it does not).
  void resume(int64_t consumed_samples, const nlohmann::json& delay_state);

  struct Batch {
    std::vector<int64_t> lengths;  // one per non-empty document, in the batch's order
    OutlierDelay::Batch drawn;     // its documents and what the delay did to them
  };
  Batch next();
  // The tokens of the batch's sequences, in the order of its lengths (each truncated as its
  // length says): what a runtime trains on.
  std::vector<std::vector<int32_t>> tokens(const Batch& batch) const;
  // Documents the delay holds back (0 without it).
  int64_t waiting() const;
  // The data position a checkpoint saves: documents drawn from the order so far, and the delay's
  // documents drawn but not trained yet (outlier_delay_state.h; null without the delay).
  int64_t consumed_samples() const { return stream_.consumed_samples(); }
  nlohmann::json delay_state() const;
  // Every dataset prefix the run's flags name, each once.
  const std::vector<std::string>& prefixes() const { return sets_.prefixes(); }

 private:
  int64_t length(const DocumentRef& doc) const;  // trained tokens: truncated to seq-length

  RunDatasets sets_;
  DocumentStream stream_;
  std::optional<OutlierDelay> delay_;
  int64_t seq_length_;
};

}  // namespace infinipipe::data
