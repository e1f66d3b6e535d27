// The per-iteration agreement on stopping. A signal may reach one rank only (a scheduler, a
// user's kill), and the exit-duration clock runs on each rank apart: once per iteration every
// rank contributes what it saw and all receive the element-wise maximum, so every rank stops
// after the same iteration and the checkpoint they save together is complete.
#pragma once

#include <cstdint>
#include <span>

#include "comm/mpi_comm.h"

namespace infinipipe {

// All-reduces `values` with MPI_MAX over `comm` in place, with the p2p deadline (timeout_s),
// naming the iteration in errors. A single-rank communicator returns at once.
void mpi_stop_agree(MPI_Comm comm, std::span<int32_t> values, double timeout_s, int64_t iteration);

}  // namespace infinipipe
