#include "comm/mpi_text.h"

#include <cstdint>
#include <numeric>

#include <fmt/format.h>

#include "comm/mpi_comm.h"

namespace infinipipe {

namespace {

// One broadcast from rank 0, waited for with the deadline: a rank that stopped is named instead
// of hanging the others.
void text_broadcast_part(MPI_Comm comm, void* data, int count, MPI_Datatype type, double timeout_s,
                         const WaitContext& ctx, const std::string& what) {
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Ibcast(data, count, type, 0, comm, &req), "starting the broadcast of " + what);
  mpi_wait_deadline({&req, 1}, {}, timeout_s, ctx);
}

}  // namespace

std::string mpi_text_broadcast(MPI_Comm comm, std::string text, double timeout_s,
                               const std::string& what, const std::string& during,
                               const std::string& suspect) {
  const std::vector<int> peers = comm_peers(comm);
  const std::string size_what = what + "'s size";
  int64_t n = static_cast<int64_t>(text.size());
  text_broadcast_part(comm, &n, 1, MPI_INT64_T, timeout_s,
                      {fmt::format("the broadcast of {} {}", size_what, during), suspect, peers},
                      size_what);
  text.resize(static_cast<size_t>(n));
  text_broadcast_part(comm, text.data(), mpi_count(n, what), MPI_CHAR, timeout_s,
                      {fmt::format("the broadcast of {} {}", what, during), suspect, peers}, what);
  return text;
}

std::vector<std::string> mpi_text_gather(MPI_Comm comm, const std::string& mine, double timeout_s,
                                         const std::string& what, const std::string& suspect) {
  int n = 0, rank = 0;
  mpi_check(MPI_Comm_size(comm, &n), "reading the size of the group of " + what);
  mpi_check(MPI_Comm_rank(comm, &rank), "reading this rank's place in " + what);
  const bool root = rank == 0;
  const WaitContext ctx{what, suspect, comm_peers(comm)};
  int size = mpi_count(static_cast<int64_t>(mine.size()), what);
  std::vector<int> sizes(root ? n : 0);
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Igather(&size, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm, &req), ctx.what);
  mpi_wait_deadline({&req, 1}, {}, timeout_s, ctx);
  std::vector<int> offsets(sizes.size(), 0);
  if (root) std::exclusive_scan(sizes.begin(), sizes.end(), offsets.begin(), 0);
  std::string all(root ? static_cast<size_t>(offsets.back() + sizes.back()) : 0, '\0');
  mpi_check(MPI_Igatherv(mine.data(), size, MPI_CHAR, all.data(), sizes.data(), offsets.data(),
                         MPI_CHAR, 0, comm, &req),
            ctx.what);
  mpi_wait_deadline({&req, 1}, {}, timeout_s, ctx);
  std::vector<std::string> out;
  for (size_t r = 0; r < sizes.size(); ++r)
    out.push_back(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(sizes[r])));
  return out;
}

}  // namespace infinipipe
