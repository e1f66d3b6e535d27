// The planner's allocator settings: memory freed between candidates is reused, not given back to
// the system and faulted in again, and the heap is backed by huge pages where the kernel offers
// them.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
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

// Whether the kernel backs memory advised with MADV_HUGEPAGE by huge pages ("always" or
// "madvise" mode).
bool huge_pages_on_request() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(in, mode);
  return mode.find("[always]") != std::string::npos || mode.find("[madvise]") != std::string::npos;
}

TEST(AllocatorKeep, TheHeapIsBackedByHugePages) {
  if (!huge_pages_on_request()) GTEST_SKIP() << "this kernel offers no transparent huge pages";
  allocator_keep_freed_memory();
  allocator_huge_pages(size_t{128} << 20);
  const int64_t before = minor_faults();
  // 64 MiB written in 16 KiB blocks: 16384 faults of 4 KiB pages, 32 of huge pages.
  build_and_drop(4096, 16 << 10);
  // Generous: the kernel falls back to small pages where it finds no free huge page at once.
  EXPECT_LT(minor_faults() - before, 16384 / 4) << "the heap was faulted in 4 KiB at a time";
}
#endif

}  // namespace
}  // namespace infinipipe
