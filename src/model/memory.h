// Accounting allocator: every buffer of the engine is charged to a MemoryTracker category, so
// the measured peak can be compared with what the cost model predicts for a plan.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <vector>

namespace infinipipe {

enum class MemCategory : int32_t {
  mem_weights = 0,
  mem_grads,
  mem_optimizer,
  mem_activations,
  mem_workspace,
  mem_count,
};
const char* mem_category_name(MemCategory c);

// Current and peak bytes per category and in total; thread-safe.
class MemoryTracker {
 public:
  void charge(MemCategory c, int64_t bytes);
  void release(MemCategory c, int64_t bytes);
  int64_t current(MemCategory c) const;
  int64_t peak(MemCategory c) const;
  int64_t current_total() const;
  int64_t peak_total() const;
  // Starts a new measurement window: peaks drop to the current values.
  void reset_peak();
  // A second window, independent of reset_peak's, for the peak total inside one action while the
  // iteration's peak keeps counting. Const: observing does not change what is allocated.
  void window_start() const;
  int64_t window_peak() const;

 private:
  static constexpr int kCount = static_cast<int>(MemCategory::mem_count);
  mutable std::mutex mutex_;
  std::array<int64_t, kCount> current_{};
  std::array<int64_t, kCount> peak_{};
  int64_t current_total_ = 0;
  int64_t peak_total_ = 0;
  mutable int64_t window_peak_total_ = 0;
};

// A 64-byte aligned fp32 buffer that charges its tracker while it lives. Move-only.
class Tensor {
 public:
  Tensor() = default;
  // Zero-filled unless zero == false.
  Tensor(MemoryTracker& tracker, MemCategory category, std::vector<int64_t> shape,
         bool zero = true);
  ~Tensor();
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * static_cast<int64_t>(sizeof(float)); }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t size(int i) const { return shape_.at(static_cast<size_t>(i)); }
  bool empty() const { return data_ == nullptr; }
  MemCategory category() const { return category_; }
  void fill_zero();
  // A new tensor with the same shape and contents, charged to `category`.
  Tensor clone(MemCategory category) const;
  void reset();  // frees the buffer now

 private:
  MemoryTracker* tracker_ = nullptr;
  MemCategory category_ = MemCategory::mem_workspace;
  std::vector<int64_t> shape_;
  float* data_ = nullptr;
  int64_t numel_ = 0;
};

}  // namespace infinipipe
