// Megatron-LM's defaults next to infinipipe's, for `infinipipe config show --diff-megatron`:
// every option whose default differs, with the reason it still does (docs/megatron.md).
#pragma once

#include <string>
#include <vector>

#include "core/config.h"

namespace infinipipe::options {

struct DefaultDifference {
  std::string option;      // infinipipe's option name
  std::string infinipipe;  // its value in the configuration shown
  std::string megatron;    // Megatron-LM's default (core_v0.15.0)
  std::string why;
};

// The options of `cfg` that differ from Megatron-LM's defaults, then the behaviours without an
// option that differ; computed from the configuration, so a changed default shows up here.
std::vector<DefaultDifference> megatron_default_differences(const Config& cfg);
std::string format_default_differences(const std::vector<DefaultDifference>& diffs);

}  // namespace infinipipe::options
