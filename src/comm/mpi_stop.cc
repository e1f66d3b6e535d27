#include "comm/mpi_stop.h"

#include <fmt/format.h>

namespace infinipipe {

void mpi_stop_agree(MPI_Comm comm, std::span<int32_t> values, double timeout_s, int64_t iteration) {
  int size = 1;
  mpi_check(MPI_Comm_size(comm, &size), "the size of the stop agreement's communicator");
  if (size == 1 || values.empty()) return;
  const std::string during = fmt::format("after iteration {}", iteration);
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallreduce(MPI_IN_PLACE, values.data(),
                           mpi_count(static_cast<int64_t>(values.size()), "stop flags"), MPI_INT32_T,
                           MPI_MAX, comm, &req),
            "starting the stop agreement " + during);
  mpi_wait_deadline({&req, 1}, {}, timeout_s,
                    {"every rank's stop flags " + during,
                     "a rank may have died or hung before finishing the iteration",
                     comm_peers(comm)});
}

}  // namespace infinipipe
