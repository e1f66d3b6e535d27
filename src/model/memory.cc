#include "model/memory.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.h"

namespace infinipipe {

const char* mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::mem_weights:
      return "weights";
    case MemCategory::mem_grads:
      return "grads";
    case MemCategory::mem_optimizer:
      return "optimizer";
    case MemCategory::mem_activations:
      return "activations";
    case MemCategory::mem_workspace:
      return "workspace";
    case MemCategory::mem_count:
      break;
  }
  return "unknown";
}

void MemoryTracker::charge(MemCategory c, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  int i = static_cast<int>(c);
  current_[i] += bytes;
  if (current_[i] > peak_[i]) peak_[i] = current_[i];
  current_total_ += bytes;
  if (current_total_ > peak_total_) peak_total_ = current_total_;
  if (current_total_ > window_peak_total_) window_peak_total_ = current_total_;
}

void MemoryTracker::release(MemCategory c, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  current_[static_cast<int>(c)] -= bytes;
  current_total_ -= bytes;
}

int64_t MemoryTracker::current(MemCategory c) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_[static_cast<int>(c)];
}

int64_t MemoryTracker::peak(MemCategory c) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_[static_cast<int>(c)];
}

int64_t MemoryTracker::current_total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_total_;
}

int64_t MemoryTracker::peak_total() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_total_;
}

void MemoryTracker::window_start() const {
  std::lock_guard<std::mutex> lock(mutex_);
  window_peak_total_ = current_total_;
}

int64_t MemoryTracker::window_peak() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return window_peak_total_;
}

void MemoryTracker::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_ = current_;
  peak_total_ = current_total_;
}

Tensor::Tensor(MemoryTracker& tracker, MemCategory category, std::vector<int64_t> shape, bool zero)
    : tracker_(&tracker), category_(category), shape_(std::move(shape)) {
  numel_ = 1;
  for (int64_t d : shape_) {
    if (d < 0) fail("tensor: negative dimension {} in a shape; this is a bug in the caller", d);
    numel_ *= d;
  }
  if (numel_ == 0) return;
  // Round up to a multiple of the alignment, as aligned_alloc requires.
  size_t bytes = (static_cast<size_t>(numel_) * sizeof(float) + 63) / 64 * 64;
  data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (data_ == nullptr) {
    fail("out of host memory allocating {} bytes for {}; lower the chunk size or memory budget",
         bytes, mem_category_name(category_));
  }
  if (zero) std::memset(data_, 0, static_cast<size_t>(numel_) * sizeof(float));
  tracker_->charge(category_, this->bytes());
}

Tensor::~Tensor() {
  reset();
}

Tensor::Tensor(Tensor&& other) noexcept
    : tracker_(other.tracker_),
      category_(other.category_),
      shape_(std::move(other.shape_)),
      data_(other.data_),
      numel_(other.numel_) {
  other.data_ = nullptr;
  other.numel_ = 0;
  other.shape_.clear();
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    reset();
    tracker_ = other.tracker_;
    category_ = other.category_;
    shape_ = std::move(other.shape_);
    data_ = other.data_;
    numel_ = other.numel_;
    other.data_ = nullptr;
    other.numel_ = 0;
    other.shape_.clear();
  }
  return *this;
}

void Tensor::fill_zero() {
  if (data_ != nullptr) std::memset(data_, 0, static_cast<size_t>(numel_) * sizeof(float));
}

Tensor Tensor::clone(MemCategory category) const {
  if (tracker_ == nullptr) return Tensor();
  Tensor t(*tracker_, category, shape_, false);
  if (numel_ > 0) std::memcpy(t.data_, data_, static_cast<size_t>(numel_) * sizeof(float));
  return t;
}

void Tensor::reset() {
  if (data_ != nullptr) {
    std::free(data_);
    tracker_->release(category_, bytes());
  }
  data_ = nullptr;
  numel_ = 0;
  shape_.clear();
}

}  // namespace infinipipe
