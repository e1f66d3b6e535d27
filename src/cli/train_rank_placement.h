// `train --rank-placement`: the rank order of a distributed run, decided before its groups are
// made; with auto, by the bytes each order would send between the job's hosts (comm/
// rank_placement.h), printed by rank 0 with its reason.
#pragma once

#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "core/config.h"

namespace infinipipe {

RankOrder train_rank_order(const Config& cfg, const Comm& comm, bool print);

}  // namespace infinipipe
