// CPU time of the calling thread: what an action computed, apart from the time its rank waited
// for a core it shares with other ranks (the wall interval holds both).
#pragma once

namespace infinipipe::obs {

// Seconds of CPU the calling thread has used (CLOCK_THREAD_CPUTIME_ID); -1 where it cannot be
// read.
double thread_cpu_seconds();

}  // namespace infinipipe::obs
