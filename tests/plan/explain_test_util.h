// The batch the explanation tests plan: examples/lengths-small.txt under examples/cpu-small.yaml's
// model and parallel setting.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "common/build_paths.h"
#include "core/config.h"
#include "test_plan_util.h"

namespace infinipipe::plan::testing {

// examples/lengths-small.txt: one length a line, '#' lines are comments.
inline std::vector<int64_t> example_lengths() {
  std::ifstream in(std::string(INFINIPIPE_SOURCE_DIR) + "/examples/lengths-small.txt");
  std::vector<int64_t> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') out.push_back(std::stoll(line));
  return out;
}

// examples/cpu-small.yaml's model and parallel setting, at `budget` bytes per rank.
inline Config example_config(int64_t budget,
                             RecomputeGranularity g = RecomputeGranularity::adaptive) {
  Config cfg = small_config(2);
  cfg.model.vocab_size = 257;
  cfg.parallel.min_tail_slice = 512;
  cfg.parallel.recompute_granularity = g;
  cfg.training.memory_budget = budget;
  return cfg;
}

}  // namespace infinipipe::plan::testing
