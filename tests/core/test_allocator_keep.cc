// The planner's allocator setting: memory freed between candidates is reused, not given back to
// the system and faulted in again.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/allocator_keep.h"

namespace infinipipe {
namespace {

int64_t minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// What a candidate's recompute problem does: many blocks of a few KiB, written, all freed.
void build_and_drop(int blocks, size_t bytes) {
  std::vector<char*> held;
  held.reserve(static_cast<size_t>(blocks));
  for (int i = 0; i < blocks; ++i) {
    char* p = static_cast<char*>(std::malloc(bytes));
    ASSERT_NE(p, nullptr);
    for (size_t j = 0; j < bytes; j += 4096) p[j] = 1;
    held.push_back(p);
  }
  for (char* p : held) std::free(p);
}

#if defined(__GLIBC__)
TEST(AllocatorKeep, FreedMemoryIsReusedWithoutFaultingItInAgain) {
  allocator_keep_freed_memory();
  constexpr int kBlocks = 2000, kRounds = 20;
  constexpr size_t kBytes = 16 << 10;  // 8000 pages a round
  build_and_drop(kBlocks, kBytes);     // the first round faults its pages in
  const int64_t before = minor_faults();
  for (int r = 0; r < kRounds; ++r) build_and_drop(kBlocks, kBytes);
  // Given back after each round (glibc's default: trimmed once 128 KiB is free at the top), every
  // round would fault its 8000 pages in again: 160000.
  EXPECT_LT(minor_faults() - before, 8000) << "freed memory was given back and faulted in again";
}
#endif

}  // namespace
}  // namespace infinipipe
