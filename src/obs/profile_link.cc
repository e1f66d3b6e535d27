#include "obs/profile_link.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "comm/mpi_watchdog.h"
#include "core/error.h"
#include "cost/fit.h"

namespace infinipipe::obs {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Rank 0 and 1 bounce `bytes` back and forth; one way is half a round trip.
double ping_pong(MPI_Comm comm, int rank, int64_t bytes, int64_t repeats) {
  std::vector<char> buf(static_cast<size_t>(bytes), 1);
  const int n = mpi_count(bytes, "profile ping-pong");
  std::vector<double> t;
  for (int64_t r = 0; r <= repeats; ++r) {  // the first round trip warms the path up
    mpi_check(MPI_Barrier(comm), "profile barrier");
    const double t0 = MPI_Wtime();
    if (rank == 0) {
      mpi_check(MPI_Send(buf.data(), n, MPI_BYTE, 1, 71, comm), "profile send");
      mpi_check(MPI_Recv(buf.data(), n, MPI_BYTE, 1, 72, comm, MPI_STATUS_IGNORE), "profile recv");
    } else if (rank == 1) {
      mpi_check(MPI_Recv(buf.data(), n, MPI_BYTE, 0, 71, comm, MPI_STATUS_IGNORE), "profile recv");
      mpi_check(MPI_Send(buf.data(), n, MPI_BYTE, 0, 72, comm), "profile send");
    }
    if (r > 0) t.push_back((MPI_Wtime() - t0) / 2);
  }
  return median_of(t);
}

double allreduce(MPI_Comm comm, int64_t bytes, int64_t repeats) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> in(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n));
  std::vector<double> t;
  for (int64_t r = 0; r <= repeats; ++r) {
    mpi_check(MPI_Barrier(comm), "profile barrier");
    const double t0 = MPI_Wtime();
    mpi_check(MPI_Allreduce(in.data(), out.data(), mpi_count(n, "profile all-reduce"), MPI_FLOAT,
                            MPI_SUM, comm),
              "profile all-reduce");
    double dt = MPI_Wtime() - t0, slowest = 0;
    // The collective takes as long as its slowest rank.
    mpi_check(MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm), "profile all-reduce");
    if (r > 0) t.push_back(slowest);
  }
  return median_of(t);
}

}  // namespace

LinkProfile profile_links(int64_t max_bytes, int64_t repeats) {
  LinkProfile p;
  if (!mpi_launched()) {
    p.note = "not started by mpirun: the preset's link numbers are kept";
    return p;
  }
  static Comm comm;  // lives to the end of the process: MPI is initialised once
  p.rank = comm.rank();
  p.world = comm.size();
  if (p.world < 2) {
    p.note = "one MPI rank: the preset's link numbers are kept";
    return p;
  }
  // Blocking calls, so the times are MPI's own (not our polling's); the watchdog ends the job,
  // naming the measurement, should a rank die or hang in one.
  Watchdog watchdog(comm.options().watchdog_timeout());
  std::vector<int64_t> sizes;
  for (int64_t b = 4096; b <= std::max<int64_t>(max_bytes, 4096); b *= 4) sizes.push_back(b);
  for (int64_t b : sizes) {
    Watchdog::Scope armed(watchdog, fmt::format("the link profile's ping-pong of {} bytes", b));
    const double s = ping_pong(comm.world(), p.rank, b, repeats);
    if (p.rank == 0) p.samples.push_back({"p2p", b, 2, s});
  }
  std::vector<int64_t> ar_bytes;
  std::vector<double> ar_seconds;
  for (int64_t b : sizes) {
    Watchdog::Scope armed(watchdog, fmt::format("the link profile's all-reduce of {} bytes", b));
    const double s = allreduce(comm.world(), b, repeats);
    p.samples.push_back({"allreduce", b, p.world, s});
    ar_bytes.push_back(b);
    ar_seconds.push_back(s);
  }
  p.measured = true;
  if (p.rank != 0) return p;
  std::vector<int64_t> bytes;
  std::vector<double> secs;
  for (const LinkSample& s : p.samples)
    if (s.kind == "p2p") {
      bytes.push_back(s.bytes);
      secs.push_back(s.seconds);
    }
  const cost::LinkFit fit = cost::fit_link(bytes, secs);
  p.bandwidth = fit.bandwidth;
  p.latency_s = fit.latency_s;
  // The cost model's ring all-reduce with the fitted p2p link, against what MPI took.
  std::vector<double> err;
  const double n = p.world;
  for (size_t i = 0; i < ar_bytes.size(); ++i) {
    const double pred = 2 * (n - 1) / n * static_cast<double>(ar_bytes[i]) / p.bandwidth +
                        2 * (n - 1) * p.latency_s;
    err.push_back(std::abs(pred - ar_seconds[i]) / ar_seconds[i]);
  }
  p.allreduce_median_error = median_of(err);
  p.allreduce_max_error = err.empty() ? 0 : *std::max_element(err.begin(), err.end());
  p.note = fmt::format("measured over MPI between {} ranks on this host", p.world);
  return p;
}

void apply_link_profile(const LinkProfile& p, cost::Coefficients& c) {
  if (!p.measured || p.bandwidth <= 0) return;
  c.p2p_bandwidth_intra = p.bandwidth;
  c.alltoall_bandwidth = p.bandwidth;
  c.p2p_latency_s = p.latency_s;
  c.alltoall_latency_s = p.latency_s;  // MPI's all-to-all here costs what its messages do
  c.p2p_bandwidth_inter = std::min(c.p2p_bandwidth_inter, p.bandwidth);
}

}  // namespace infinipipe::obs
