// The order in which documents form global batches: each global batch takes the next
// global_batch_size documents of a seeded shuffle of all documents; every epoch is reshuffled
// with seed + epoch. The whole state is consumed_samples (documents handed out so far, as in
// Megatron-LM), so a checkpoint that stores it resumes the exact same order.
#pragma once

#include <cstdint>
#include <vector>

namespace infinipipe::data {

class BatchSampler {
 public:
  // Throws ConfigError for a non-positive global batch size, Error for an empty dataset.
  BatchSampler(int64_t num_documents, int64_t global_batch_size, uint64_t seed);

  // Document ids of the next global batch; a batch that crosses the end of an epoch continues
  // with the start of the next epoch's order.
  std::vector<int64_t> next();

  int64_t consumed_samples() const { return consumed_samples_; }
  void set_consumed_samples(int64_t consumed);  // throws Error outside [0, 2^53]
  int64_t epoch() const { return consumed_samples_ / num_documents_; }

  int64_t num_documents() const { return num_documents_; }
  int64_t global_batch_size() const { return global_batch_size_; }
  uint64_t seed() const { return seed_; }

  // The document order of one epoch (a permutation of 0..num_documents-1).
  std::vector<int64_t> epoch_order(int64_t epoch) const;

 private:
  int64_t num_documents_;
  int64_t global_batch_size_;
  uint64_t seed_;
  int64_t consumed_samples_ = 0;
  int64_t order_epoch_ = -1;  // epoch whose order is cached in order_
  std::vector<int64_t> order_;
};

}  // namespace infinipipe::data
