// The profiler's link half: point-to-point ping-pong between two ranks of one host and
// all-reduce over MPI between the ranks `infinipipe profile` runs on (mpirun -np >= 2), fitted
// to bandwidth + latency; when the ranks span two hosts or more, also the links between every
// pair of hosts (comm/mpi_links.h), which the calibration file keeps as its host links.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cost/cost_model.h"

namespace infinipipe::profile {

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
  int64_t hosts = 1;  // hosts the ranks run on
  std::vector<LinkSample> samples;
  // p2p fit between rank 0 and another rank of its host; 0 when rank 0 runs alone on its host.
  double bandwidth = 0, latency_s = 0;
  // Of the ring model against MPI's all-reduce, with the fit (one host) or the host links.
  double allreduce_median_error = 0, allreduce_max_error = 0;
  std::string note;
  // Rank 0, ranks on two hosts or more: the links between them (empty otherwise). Without the
  // job's placement when mpirun filled each host's slots in order, so a plan of fewer ranks
  // fills them the same way.
  cost::HostLinkTable host_links;
  std::string host_links_note;  // what was measured between hosts, or why nothing
};

// Without mpirun, or with one rank, measures nothing (the preset's links stay; note says so).
// Sizes from 4 KiB up to max_bytes; every rank of MPI_COMM_WORLD must call it.
LinkProfile profile_links(int64_t max_bytes, int64_t repeats);

// Puts the fitted link into the coefficients (intra-node p2p, all-to-all; latency) and, with
// host links, the slowest link between two hosts as the inter-node one (its latency the largest).
void apply_link_profile(const LinkProfile& p, cost::Coefficients& c);

}  // namespace infinipipe::profile
