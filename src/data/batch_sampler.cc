#include "data/batch_sampler.h"

#include <numeric>

#include "core/error.h"
#include "data/rng.h"

namespace infinipipe::data {

BatchSampler::BatchSampler(int64_t num_documents, int64_t global_batch_size, uint64_t seed)
    : num_documents_(num_documents), global_batch_size_(global_batch_size), seed_(seed) {
  if (global_batch_size <= 0) {
    fail_config("--global-batch-size must be positive, got {}", global_batch_size);
  }
  if (num_documents <= 0) fail("the dataset has no documents to sample; check --data-path");
}

std::vector<int64_t> BatchSampler::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(num_documents_));
  std::iota(order.begin(), order.end(), int64_t{0});
  Rng rng(seed_ + static_cast<uint64_t>(epoch));
  rng.shuffle(order);
  return order;
}

std::vector<int64_t> BatchSampler::next() {
  std::vector<int64_t> batch;
  batch.reserve(static_cast<size_t>(global_batch_size_));
  while (static_cast<int64_t>(batch.size()) < global_batch_size_) {
    const int64_t e = epoch();
    if (e != order_epoch_) {
      order_ = epoch_order(e);
      order_epoch_ = e;
    }
    batch.push_back(order_[static_cast<size_t>(consumed_samples_ % num_documents_)]);
    ++consumed_samples_;
  }
  return batch;
}

void BatchSampler::set_consumed_samples(int64_t consumed) {
  // Far beyond any run, and far enough from INT64_MAX that counting on cannot overflow.
  constexpr int64_t kMaxConsumed = int64_t{1} << 53;
  if (consumed < 0 || consumed > kMaxConsumed)
    fail("consumed_samples {} is outside [0, 2^53]; the checkpoint that supplied it is damaged",
         consumed);
  consumed_samples_ = consumed;
}

}  // namespace infinipipe::data
