// Seconds of the steady clock since `t`: how the trainer and its parts time what they run.
#pragma once

#include <chrono>

namespace infinipipe::runtime {

inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace infinipipe::runtime
