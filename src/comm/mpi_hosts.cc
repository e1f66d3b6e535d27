#include "comm/mpi_hosts.h"

#include <cstring>
#include <mutex>
#include <vector>

#include "comm/mpi_comm.h"

namespace infinipipe {

namespace {

std::mutex g_hosts_mutex;
std::vector<std::string> g_hosts;  // by world rank

}  // namespace

void rank_hosts_gather(MPI_Comm world, double timeout_s) {
  int size = 0;
  MPI_Comm_size(world, &size);
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  mpi_check(MPI_Get_processor_name(mine, &len), "reading this rank's host name");
  std::vector<char> all(static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME, '\0');
  MPI_Request req = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                           MPI_MAX_PROCESSOR_NAME, MPI_CHAR, world, &req),
            "gathering the ranks' host names");
  mpi_wait_deadline({&req, 1}, {}, timeout_s,
                    {"every rank's host name at start-up", "a rank may have died or hung", {}});
  std::vector<std::string> hosts;
  for (int r = 0; r < size; ++r) {
    const char* name = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hosts.emplace_back(name, strnlen(name, MPI_MAX_PROCESSOR_NAME));
  }
  std::lock_guard<std::mutex> lock(g_hosts_mutex);
  g_hosts = std::move(hosts);
}

std::string rank_host(int world_rank) {
  std::lock_guard<std::mutex> lock(g_hosts_mutex);
  if (world_rank < 0 || static_cast<size_t>(world_rank) >= g_hosts.size()) return "";
  return g_hosts[static_cast<size_t>(world_rank)];
}

}  // namespace infinipipe
