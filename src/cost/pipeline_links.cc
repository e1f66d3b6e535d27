#include "cost/pipeline_links.h"

#include <cmath>

#include "core/error.h"

namespace infinipipe::cost {

void PipelineLinks::validate() const {
  if (pp < 0 || pair.size() != static_cast<size_t>(pp * pp))
    fail("pipeline links: {} entries for pp {}, want pp × pp", pair.size(), pp);
  for (int32_t a = 0; a < pp; ++a) {
    for (int32_t b = 0; b < pp; ++b) {
      if (a == b) continue;
      const Link& l = at(a, b);
      if (!(l.bandwidth > 0) || !std::isfinite(l.bandwidth) || !(l.latency_s >= 0) ||
          !std::isfinite(l.latency_s))
        fail(
            "pipeline links: rank {} -> {} has bandwidth {} B/s and latency {} s; both must be "
            "finite, the bandwidth positive",
            a, b, l.bandwidth, l.latency_s);
    }
  }
}

double link_time(const Link& link, int64_t bytes) {
  if (bytes <= 0) return 0.0;
  return static_cast<double>(bytes) / link.bandwidth + link.latency_s;
}

}  // namespace infinipipe::cost
