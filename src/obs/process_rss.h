// The process's resident memory (RSS), next to the engine's own tracker: what the operating
// system holds for the whole process (code, libraries, the MPI runtime, allocator slack).
#pragma once

#include <cstdint>

namespace infinipipe::obs {

// Starts a new peak: Linux lets a process reset its high-water mark by writing "5" to
// /proc/self/clear_refs. Returns false where that is refused (the peak then runs from the
// process's start).
bool rss_peak_reset();

// The peak resident set size in bytes since the last reset (VmHWM of /proc/self/status), else
// getrusage's peak since the process started; -1 when neither can be read.
int64_t rss_peak_bytes();

}  // namespace infinipipe::obs
