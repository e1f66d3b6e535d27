// The process's allocator, set for a planner that builds and drops large structures over and
// over. glibc's malloc gives the free top of its heap back to the system once more than 128 KiB
// is free and serves blocks of its (adaptive) mapping threshold and up from fresh mappings: the
// planner builds a recompute problem per candidate (tens of MiB in many blocks) and frees it,
// so every candidate paid the page faults of memory it had just given back, a fifth to a third
// of the planning time (docs/benchmarks.md, "Huge pages for the heap").
#pragma once

#include <cstddef>

namespace infinipipe {

// Keeps up to 512 MiB of freed memory in the heap for reuse and maps only blocks of 32 MiB and
// more (a model's large tensors) on their own. Process-wide: call it once, first thing in main.
// No effect where the C library is not glibc.
void allocator_keep_freed_memory();

// Asks the kernel to back the next `bytes` of the heap with transparent huge pages (2 MiB) where
// it gives them only on request (`madvise` mode; in `always` mode the heap has them anyway). The
// 1M-token replicas' exact solve first touches some 160 MiB: 40 000 faults of 4 KiB pages at
// about 12 µs each on a virtual machine (docs/benchmarks.md, "Huge pages for the heap"). Only
// address space is reserved; pages are still backed as they are first written. Call it after
// allocator_keep_freed_memory, which keeps the reserved top from being given back. No effect
// without glibc or MADV_HUGEPAGE.
void allocator_huge_pages(size_t bytes);

}  // namespace infinipipe
