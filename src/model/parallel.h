// Loops below this many elements run on one thread: an OpenMP fork costs more than they do.
#pragma once

#include <cstdint>

namespace infinipipe {

inline constexpr int64_t kOmpMinWork = 1 << 15;

}  // namespace infinipipe
