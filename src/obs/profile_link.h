// The profiler's link half: point-to-point ping-pong and all-reduce over MPI between the ranks
// `infinipipe profile` runs on (mpirun -np >= 2), fitted to bandwidth + latency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost/cost_model.h"

namespace infinipipe::obs {

struct LinkSample {
  std::string kind;  // "p2p" (one way, half a round trip) or "allreduce"
  int64_t bytes = 0;
  int64_t ranks = 2;
  double seconds = 0;
};

struct LinkProfile {
  bool measured = false;
  int rank = 0;  // this process's rank (only rank 0 goes on to time kernels)
  int world = 1;
  std::vector<LinkSample> samples;
  double bandwidth = 0, latency_s = 0;                         // p2p fit
  double allreduce_median_error = 0, allreduce_max_error = 0;  // of the ring model, with the fit
  std::string note;
};

// Without mpirun, or with one rank, measures nothing (the preset's links stay; note says so).
// Sizes from 4 KiB up to max_bytes; every rank of MPI_COMM_WORLD must call it.
LinkProfile profile_links(int64_t max_bytes, int64_t repeats);

// Puts the fitted link into the coefficients (intra-node p2p, all-to-all; latency).
void apply_link_profile(const LinkProfile& p, cost::Coefficients& c);

}  // namespace infinipipe::obs
