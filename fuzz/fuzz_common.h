// Shared by the fuzz targets. Each target feeds its input to one real parser of the project; a
// clean Error (ConfigError included) is the right answer to hostile input. Any other exception
// escapes LLVMFuzzerTestOneInput and aborts, so libFuzzer (or replay_main.cc) reports it, as it
// reports crashes, sanitizer findings and hangs.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/error.h"

namespace infinipipe::fuzz {

inline std::string fuzz_text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// A per-process scratch path for parsers that read files (memory-backed where available).
inline std::string fuzz_scratch_path(const char* name) {
  const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return std::string(dir) + "/infinipipe-fuzz-" + std::to_string(getpid()) + "-" + name;
}

inline void fuzz_write_file(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();  // the harness itself failed, not the parser
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

}  // namespace infinipipe::fuzz
