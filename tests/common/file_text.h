// The whole of a file a test wrote or a checkpoint holds, read the way the project reads a
// checkpoint's files (core/input_file.h: bounded, never through a symbolic link).
#pragma once

#include <string>

#include "core/input_file.h"

namespace infinipipe {

inline std::string file_text(const std::string& path) {
  return input_file_read(path, input_kind::kCheckpointWholeFile, InputLinks::refuse);
}

}  // namespace infinipipe
