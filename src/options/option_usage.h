// Options given that the resolved configuration does not use: each gets a note naming what
// decides instead, so no accepted flag is silently ignored.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/config.h"

namespace infinipipe::options {

// `given`: the option keys set by flags or the file; `command`: the subcommand resolving them
// (empty where unknown), for the options only `train` reads.
std::vector<std::string> unused_option_notes(const Config& cfg, const std::set<std::string>& given,
                                             const std::string& command);

}  // namespace infinipipe::options
