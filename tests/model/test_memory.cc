#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "model/memory.h"

namespace infinipipe {

TEST(Memory, TensorChargesAndReleasesItsCategory) {
  MemoryTracker tr;
  {
    Tensor a(tr, MemCategory::mem_activations, {3, 5});
    EXPECT_EQ(a.numel(), 15);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
    EXPECT_EQ(tr.current(MemCategory::mem_activations), 60);
    for (int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.data()[i], 0.0f);
    Tensor b(tr, MemCategory::mem_weights, {7});
    EXPECT_EQ(tr.current_total(), 60 + 28);
    Tensor c = std::move(a);  // moves keep one charge
    EXPECT_EQ(tr.current(MemCategory::mem_activations), 60);
    Tensor d = c.clone(MemCategory::mem_workspace);
    EXPECT_EQ(tr.current(MemCategory::mem_workspace), 60);
  }
  EXPECT_EQ(tr.current_total(), 0);
  EXPECT_EQ(tr.peak_total(), 60 + 28 + 60);
  EXPECT_EQ(tr.peak(MemCategory::mem_activations), 60);
  tr.reset_peak();
  EXPECT_EQ(tr.peak_total(), 0);
}

TEST(Memory, TrackerIsThreadSafe) {
  MemoryTracker tr;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        Tensor x(tr, MemCategory::mem_workspace, {16}, false);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(tr.current_total(), 0);
  EXPECT_GE(tr.peak(MemCategory::mem_workspace), 64);
  EXPECT_LE(tr.peak(MemCategory::mem_workspace), 4 * 64);
}

}  // namespace infinipipe
