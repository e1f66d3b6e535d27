// Measured links between the ranks of one pipeline: bandwidth and latency per pair of pipeline
// ranks, as `train --measure-links` found them between the hosts the ranks run on (comm/
// mpi_links.h). With them the cost model times a point-to-point transfer by the link it really
// crosses instead of the two global numbers (intra-node, inter-node).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace infinipipe::cost {

struct Link {
  double bandwidth = 0;  // bytes/s, one direction
  double latency_s = 0;  // seconds per message
};

// pp × pp links by pipeline rank (row: sender); a pair on the same rank is unused.
struct PipelineLinks {
  int64_t pp = 0;
  std::vector<Link> pair;

  bool empty() const { return pp == 0; }
  const Link& at(int32_t from, int32_t to) const {
    return pair[static_cast<size_t>(from) * static_cast<size_t>(pp) + static_cast<size_t>(to)];
  }
  // Throws Error unless every pair of distinct ranks has a positive bandwidth and a latency >= 0.
  void validate() const;
};

// Seconds to send `bytes` over the link: bytes / bandwidth + latency (0 for no bytes).
double link_time(const Link& link, int64_t bytes);

}  // namespace infinipipe::cost
