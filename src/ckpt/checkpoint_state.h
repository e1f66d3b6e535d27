// The one rule that decides whether an iter_ folder is a complete checkpoint, shared by --load,
// `checkpoint list` and `checkpoint verify`, so a checkpoint that --load refuses for its layout
// is never listed as complete. It reads only the small files (state.json and the two indexes);
// checksums and values are checked when the data is read (CheckpointReader).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace infinipipe {

// What state.json and the indexes say, once they passed every rule.
struct CheckpointState {
  nlohmann::json state;                                          // state.json, fields checked
  std::map<std::string, std::pair<std::string, int64_t>> files;  // file -> (crc32c hex, bytes)
  std::map<std::string, std::string> model_map, optim_map;       // tensor -> file
};

// A name a checkpoint may list: one plain file name inside its folder (no '/', not hidden, no
// "." or "..", no control characters).
bool checkpoint_plain_file_name(std::string_view name);

// DIR/iter_N, read and checked: the folder and every file it lists are real (no symbolic links)
// regular files with plain names and their recorded sizes; state.json has the format, version,
// iteration and fields a load needs; every tensor of the indexes is in a listed file; and the
// optimizer entries match the optimizer kind and parameters exactly. Error saying what is wrong.
CheckpointState checkpoint_state_check(const std::string& dir, int64_t iteration);

}  // namespace infinipipe
