// The links as they are: bandwidth and latency measured between every pair of hosts of the job
// (and inside each host that runs two ranks or more), by ping-pong between one rank of each.
// `train --measure-links` does it at start and plans with the result (cost/pipeline_links.h).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace infinipipe {

struct HostLinks {
  std::vector<std::string> hosts;     // by first rank on it
  std::vector<int64_t> host_of_rank;  // world rank -> index into hosts
  // hosts × hosts, symmetric; 0 where not measured (a host running a single rank, with itself).
  std::vector<double> bandwidth;  // bytes/s, one direction
  std::vector<double> latency_s;  // half a round trip of a small message

  size_t at(int64_t a, int64_t b) const {
    return static_cast<size_t>(a) * hosts.size() + static_cast<size_t>(b);
  }
  // "ipp-host-a <-> ipp-host-b: 117 MB/s, 52 us", one line per measured pair.
  std::vector<std::string> describe() const;
};

// Collective over `world` (every rank calls it; host names from comm/mpi_hosts.h). Each wait
// has the deadline timeout_s. `bytes` is the size of the bandwidth probe messages.
HostLinks links_measure(MPI_Comm world, double timeout_s, int64_t bytes = 4 << 20);

}  // namespace infinipipe
