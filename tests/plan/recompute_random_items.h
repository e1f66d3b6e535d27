// Random recompute items for the solver tests: `items` items over `groups` groups on 2 ranks,
// held bytes falling and time rising with the recomputed layers r. The backward transient is
// flat (a constant plus 3 from r = 1) or, with `wandering_transient`, moves up or down with r,
// as the working set of a recomputed layer does.
#pragma once

#include <algorithm>
#include <random>

#include "plan/recompute.h"

namespace infinipipe::plan::testing {

inline void random_recompute_items(std::mt19937& rng, RecomputeProblem& pb, int groups, int items,
                                   bool wandering_transient) {
  pb.pp = 2;
  std::uniform_int_distribution<int> layers(1, 3), pick_group(0, groups - 1);
  std::uniform_int_distribution<int64_t> bytes(10, 100);
  std::uniform_real_distribution<double> secs(0.1, 1.0);
  pb.group_max.assign(groups, 0);
  for (int i = 0; i < items; ++i) {
    RecomputeItem it;
    it.group = pick_group(rng);
    it.rank = i % 2;
    it.max_layers = layers(rng);
    pb.group_max[it.group] = std::max(pb.group_max[it.group], it.max_layers);
    int64_t a = bytes(rng) * (it.max_layers + 1), t = bytes(rng) / 10;
    double s = 0;
    for (int r = 0; r <= it.max_layers; ++r) {
      it.act.push_back(a);
      it.transient.push_back(wandering_transient ? t : t + (r > 0 ? 3 : 0));
      it.time.push_back(s);
      a -= bytes(rng) / 2;
      if (wandering_transient) t += bytes(rng) - 30;
      s += secs(rng);
    }
    pb.items.push_back(std::move(it));
  }
}

}  // namespace infinipipe::plan::testing
