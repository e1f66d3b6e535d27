// `--pp auto` (and --dp, --vpp, --ulysses-degree auto): the degree `train` chooses by a layout
// search over its ranks before it runs (src/sim/layout_search.h). The option parser stores the
// word as this sentinel (a negative degree typed as a number is refused there), and every
// validate() but train's own resolution refuses it with a message saying so.
#pragma once

#include <cstdint>

#include "core/config.h"

namespace infinipipe {

inline constexpr int64_t kAutoDegree = -1;

inline bool parallel_has_auto(const ParallelConfig& p) {
  return p.pipeline_parallel == kAutoDegree || p.data_parallel == kAutoDegree ||
         p.virtual_stages == kAutoDegree || p.ulysses_degree == kAutoDegree;
}

}  // namespace infinipipe
