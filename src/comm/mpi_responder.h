// Who is to blame when a wait times out. When a pipeline stalls, every rank downstream of the
// culprit waits too, and all their deadlines pass at about the same time. Before blaming its
// peer, a rank asks it (on a private communicator) what it is doing: a peer that is itself
// waiting answers from its wait loop, so the asker knows the fault lies further along and
// leaves the report to the rank next to the culprit; a peer that does not answer has died or is
// stuck outside communication, and is named.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API only: OpenMPI's deprecated C++ bindings warn
#endif
#include <mpi.h>

#include <span>
#include <string>
#include <vector>

namespace infinipipe {

// Comm starts it (posting the receive of queries) and stops it before MPI_Finalize.
void responder_start(MPI_Comm world);
void responder_stop();
bool responder_active();

// Called from every wait loop: answers a pending query with "waiting <waited> s for <what>".
void responder_poll(const std::string& what, double waited_s);

// Asks each of `peers` (world ranks) at once what it is doing, answering queries meanwhile.
// Returns their answers in order, "" for one that gives none within timeout_s.
std::vector<std::string> responder_ask(std::span<const int> peers, double timeout_s,
                                       const std::string& what, double waited_s);

}  // namespace infinipipe
