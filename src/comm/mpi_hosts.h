// The host every world rank runs on (MPI_Get_processor_name, gathered once when MPI comes up), so
// an error about a peer that does not answer can say which machine to look at.
#pragma once

#include <mpi.h>

#include <string>

namespace infinipipe {

// Collective over `world`: every rank must call it (Comm's constructor does).
void rank_hosts_gather(MPI_Comm world, double timeout_s);

// The host of a world rank; "" before rank_hosts_gather or for a rank out of range.
std::string rank_host(int world_rank);

}  // namespace infinipipe
