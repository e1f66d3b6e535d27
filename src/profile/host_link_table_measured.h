// The links between a job's hosts as comm/mpi_links.h measured them, as the cost model's table
// (cost/host_link_table.h): one slot per rank a host runs, this job's placement of each rank.
// `profile` writes it into its calibration file, `train --measure-links` plans with it.
#pragma once

#include "comm/mpi_links.h"
#include "cost/host_link_table.h"

namespace infinipipe::profile {

cost::HostLinkTable host_link_table(const HostLinks& measured);

}  // namespace infinipipe::profile
