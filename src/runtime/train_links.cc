#include "runtime/train_links.h"

#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "comm/mpi_links.h"
#include "profile/host_link_table_measured.h"

namespace infinipipe::runtime {

cost::HostLinkTable train_links_measure(MPI_Comm world, double timeout_s, bool print) {
  const HostLinks links = links_measure(world, timeout_s);
  if (print) {
    for (const std::string& line : links.describe()) fmt::print("link {}\n", line);
    std::fflush(stdout);
  }
  return profile::host_link_table(links);
}

}  // namespace infinipipe::runtime
