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

// What a flag means where both have it but count or do different things: what a sample is,
// what the batch and the sample-based schedule count, masks, positions, the loss, how dp is
// derived. Megatron-LM's side is its default (core_v0.15.0, pretrain_gpt.py's GPTDataset).
struct SemanticDifference {
  std::string subject;  // "a sample", "--global-batch-size", ...
  std::string infinipipe;
  std::string megatron;
  std::string consequence;  // what it means for a ported script, and the way to match it
};
std::vector<SemanticDifference> megatron_semantic_differences(const Config& cfg);
std::string format_semantic_differences(const std::vector<SemanticDifference>& diffs);

}  // namespace infinipipe::options
