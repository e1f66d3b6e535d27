// Outlier delay (after WLB-LLM): global batches whose data-parallel replicas can finish
// together. A sequence whose predicted cost exceeds a replica's share of the sequences its batch
// drew from the stream (their cost / dp) cannot be balanced by any split of that batch: the
// replica that gets it finishes last whatever the others do. Such a sequence is held back in a
// queue; queued sequences are released together, dp at a time (one per replica), into a batch
// whose mean replica load (batch cost / dp) absorbs the costliest of them, and the
// batch is refilled from the stream so it keeps global_batch_size documents. Queued documents of
// an epoch that ended are flushed into the batch that draws the next epoch's first document of
// their dataset, so every document is still trained exactly once per epoch.
//
// The whole state is data: the stream's position, the queue and the lookahead (documents drawn
// from the stream but not yet placed in a batch), so a checkpoint that saves them resumes the
// exact same order (docs/data.md, "Outlier delay").
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "data/document_stream.h"

namespace infinipipe::data {

struct DelayedDocument {
  DocumentRef ref;
  int64_t length = 0;  // tokens, as the batch trains it (truncated to seq-length)
  int64_t epoch = 0;   // pass of its dataset it was drawn in
  bool operator==(const DelayedDocument&) const = default;
};

class OutlierDelay {
 public:
  // Predicted cost of one whole sequence of `length` tokens (any unit; only ratios matter).
  using Cost = std::function<double(int64_t length)>;
  // The stream, one document at a time.
  using Source = std::function<DelayedDocument()>;

  // ConfigError unless replicas >= 2 and global_batch_size >= 2 × replicas (a batch must hold
  // the dp released outliers and the sequences that fill the other replicas up).
  OutlierDelay(int64_t global_batch_size, int64_t replicas, Cost cost);

  struct Batch {
    std::vector<DelayedDocument> documents;  // global_batch_size, released outliers first
    int64_t released = 0;                    // queued outliers released together (0 or dp)
    int64_t flushed = 0;                     // queued documents of an ended epoch
    int64_t delayed = 0;                     // documents this batch drew and put into the queue
  };
  Batch next(const Source& source);

  // At most this many documents wait (4 × dp); an outlier drawn while the queue is full stays in
  // its batch.
  int64_t capacity() const { return 4 * replicas_; }
  std::vector<DelayedDocument> queue() const;
  std::vector<DelayedDocument> lookahead() const;
  // Restores a saved state; Error if the queue holds more than capacity().
  void restore(std::vector<DelayedDocument> queue, std::vector<DelayedDocument> lookahead);

 private:
  struct Entry {
    DelayedDocument doc;
    double cost = 0;
  };
  struct Assembly {
    std::vector<Entry> batch, queue;
    size_t used = 0;  // lookahead documents consumed (a prefix)
    int64_t released = 0, flushed = 0, delayed = 0;
    double mean = 0;  // batch cost / dp
  };
  Assembly assemble(const std::vector<size_t>& release, const Source& source);
  const Entry& look(size_t k, const Source& source);  // draws into the lookahead as needed
  void commit(Assembly a);

  int64_t global_batch_size_;
  int64_t replicas_;
  Cost cost_;
  std::vector<Entry> queue_;      // in the order the documents were delayed
  std::vector<Entry> lookahead_;  // in stream order
};

}  // namespace infinipipe::data
