// `train --measure-links`: the links between the job's hosts, measured once on the world before
// the rank groups are made, so that the rank order is chosen with them (setup/train_auto_layout.h)
// and the plans are made with the same table (train.cc).
#pragma once

#include <mpi.h>

#include "cost/host_link_table.h"

namespace infinipipe::runtime {

// Collective over `world` (comm/mpi_links.h), each wait with the deadline `timeout_s`; `print`:
// this rank prints each measured pair ("link a <-> b: 117.0 MB/s, 52 us").
cost::HostLinkTable train_links_measure(MPI_Comm world, double timeout_s, bool print);

}  // namespace infinipipe::runtime
