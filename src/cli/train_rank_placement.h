// `train --rank-placement`: the rank order of a distributed run, decided before its groups are
// made. With auto and links measured between two hosts or more, the layout search has chosen
// it already (train_auto_layout.h) and the options name it; otherwise by the bytes each order
// would send between the job's hosts (comm/rank_placement.h), printed by rank 0 with its reason
// and the rule that chose.
#pragma once

#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "core/config.h"

namespace infinipipe {

RankOrder train_rank_order(const Config& cfg, const Comm& comm, bool print);

}  // namespace infinipipe
