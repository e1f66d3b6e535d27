#include "core/allocator_keep.h"

#include <cstdint>
#include <cstdlib>  // defines __GLIBC__ where the C library is glibc

#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#endif

namespace infinipipe {
namespace {
constexpr size_t kKeptFree = size_t{512} << 20;
constexpr size_t kMapThreshold = size_t{32} << 20;  // glibc's largest (HEAP_MAX_SIZE / 2)
}  // namespace

void allocator_keep_freed_memory() {
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(kKeptFree));
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMapThreshold));
#endif
}

void allocator_huge_pages(size_t bytes) {
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
  // Blocks below the mapping threshold come from the heap's top, one after the other; the range
  // they span is advised, then given back to the heap, which keeps it (kKeptFree).
  constexpr size_t kBlock = kMapThreshold / 2;
  constexpr size_t kMaxBlocks = kKeptFree / kBlock;
  void* blocks[kMaxBlocks];
  const size_t n = bytes / kBlock < kMaxBlocks ? bytes / kBlock : kMaxBlocks;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  size_t got = 0;
  for (; got < n; ++got) {
    blocks[got] = std::malloc(kBlock);
    if (blocks[got] == nullptr) break;
    const auto at = reinterpret_cast<uintptr_t>(blocks[got]);
    lo = at < lo ? at : lo;
    hi = at + kBlock > hi ? at + kBlock : hi;
  }
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  lo = (lo + kHuge - 1) & ~(kHuge - 1);
  hi &= ~(kHuge - 1);
  // A hole in the range (another mapping) fails the call for it alone; the advice is a hint.
  if (got > 0 && lo < hi) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  for (size_t i = 0; i < got; ++i) std::free(blocks[i]);
#else
  (void)bytes;
#endif
}

}  // namespace infinipipe
