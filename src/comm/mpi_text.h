// Text between the ranks of a communicator, every wait with the deadline (mpi_comm.h): the root's
// text to every rank, every rank's text to the root. The trainer sends plans and checkpointed
// cost fits this way, so its own code handles no MPI datatype. The root is rank 0 of `comm`.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only: OpenMPI's deprecated C++ bindings warn
#endif
#include <mpi.h>

#include <string>
#include <vector>

namespace infinipipe {

// The root's `text` on every rank (the others' argument is ignored): its size, then its bytes.
// `what` names it ("the plan"); a wait past the deadline is an Error naming "the broadcast of
// <what> <during>" and `suspect`.
std::string mpi_text_broadcast(MPI_Comm comm, std::string text, double timeout_s,
                               const std::string& what, const std::string& during,
                               const std::string& suspect);

// Every rank's `mine` on the root, in rank order; empty on the other ranks. `what` names the
// gather in errors, `suspect` the likely culprit of a wait past the deadline.
std::vector<std::string> mpi_text_gather(MPI_Comm comm, const std::string& mine, double timeout_s,
                                         const std::string& what, const std::string& suspect);

}  // namespace infinipipe
