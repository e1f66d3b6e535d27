#include "profile/profile_link.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "comm/mpi_hosts.h"
#include "comm/mpi_links.h"
#include "comm/mpi_watchdog.h"
#include "core/error.h"
#include "cost/fit.h"
#include "cost/host_link_table.h"
#include "profile/host_link_table_measured.h"

namespace infinipipe::profile {
namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Rounds per size: at least kMinRounds, as each one costs microseconds up to a MiB.
constexpr int64_t kMinRounds = 16;

// A link's time from its rounds: their lower quartile. Waiting ranks yield their core, and on a
// busy host a round can then lose a time slice (4 ms, against microseconds): the median of a few
// rounds was such a slice in runs beside the test suite. The fastest round is no better: with
// both ranks on one core a MiB can stay in its cache, twice as fast as the link.
double link_time_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 4];
}

// Rank 0 and `peer` bounce `bytes` back and forth; one way is half a round trip.
double ping_pong(MPI_Comm comm, int rank, int peer, int64_t bytes, int64_t repeats) {
  std::vector<char> buf(static_cast<size_t>(bytes), 1);
  const int n = mpi_count(bytes, "profile ping-pong");
  std::vector<double> t;
  for (int64_t r = 0; r <= std::max(repeats, kMinRounds); ++r) {  // the first one warms up
    mpi_check(MPI_Barrier(comm), "profile barrier");
    const double t0 = MPI_Wtime();
    if (rank == 0) {
      mpi_check(MPI_Send(buf.data(), n, MPI_BYTE, peer, 71, comm), "profile send");
      mpi_check(MPI_Recv(buf.data(), n, MPI_BYTE, peer, 72, comm, MPI_STATUS_IGNORE),
                "profile recv");
    } else if (rank == peer) {
      mpi_check(MPI_Recv(buf.data(), n, MPI_BYTE, 0, 71, comm, MPI_STATUS_IGNORE), "profile recv");
      mpi_check(MPI_Send(buf.data(), n, MPI_BYTE, 0, 72, comm), "profile send");
    }
    if (r > 0) t.push_back((MPI_Wtime() - t0) / 2);
  }
  return link_time_of(t);
}

double allreduce(MPI_Comm comm, int64_t bytes, int64_t repeats) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  std::vector<float> in(static_cast<size_t>(n), 1.0f), out(static_cast<size_t>(n));
  std::vector<double> t;
  for (int64_t r = 0; r <= std::max(repeats, kMinRounds); ++r) {
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
  return link_time_of(t);
}

// The hosts of the world's ranks (by first rank on each) and each rank's host index.
struct WorldHosts {
  std::vector<std::string> names;
  std::vector<int64_t> of_rank;
};

WorldHosts world_hosts(int world) {
  WorldHosts h;
  for (int r = 0; r < world; ++r) {
    const std::string name = rank_host(r);
    auto it = std::find(h.names.begin(), h.names.end(), name);
    if (it == h.names.end()) it = h.names.insert(h.names.end(), name);
    h.of_rank.push_back(static_cast<int64_t>(it - h.names.begin()));
  }
  return h;
}

// The placement is dropped when mpirun filled each host's slots in order: the table then says
// just that, and holds any job of up to its slots, not only one of exactly this many ranks.
cost::HostLinkTable table_for_plans(cost::HostLinkTable t) {
  if (t.host_of_rank == cost::HostLinkTable{t.hosts, t.links, {}}.host_of_ranks(t.slots()))
    t.host_of_rank.clear();
  return t;
}

// The ring all-reduce over the world's ranks in rank order as the cost model prices it: with
// the fitted link on one host, on the measured links across hosts.
double allreduce_predicted(const LinkProfile& p, int64_t bytes) {
  const double n = p.world;
  if (p.host_links.empty())
    return 2 * (n - 1) / n * static_cast<double>(bytes) / p.bandwidth + 2 * (n - 1) * p.latency_s;
  cost::Coefficients c;  // inside a host the ring only crosses measured links
  cost::CollectiveCost& inside = c.collectives.row(cost::Collective::send_recv, false);
  inside.bus_bandwidth = p.bandwidth > 0 ? p.bandwidth : 1e15;
  inside.call_latency_s = p.latency_s;
  const cost::RankGrid ring{1, p.world, 1, RankOrder::megatron};
  return cost::host_allreduce_time(p.host_links, c, ring, 0, static_cast<double>(bytes));
}

}  // namespace

LinkProfile profile_links(int64_t max_bytes, int64_t repeats) {
  LinkProfile p;
  if (!mpi_launched()) {
    p.note = "not started by mpirun: the preset's link numbers are kept";
    p.host_links_note = "not started by mpirun across hosts: none measured";
    return p;
  }
  static Comm comm;  // lives to the end of the process: MPI is initialised once
  p.rank = comm.rank();
  p.world = comm.size();
  if (p.world < 2) {
    p.note = "one MPI rank: the preset's link numbers are kept";
    p.host_links_note = "one MPI rank: none measured";
    return p;
  }
  const WorldHosts hosts = world_hosts(p.world);
  p.hosts = static_cast<int64_t>(hosts.names.size());
  // The point-to-point fit is the link inside a host: rank 0 and the next rank on its host.
  int peer = -1;
  for (int r = 1; r < p.world && peer < 0; ++r)
    if (hosts.of_rank[static_cast<size_t>(r)] == 0) peer = r;
  // Blocking calls, so the times are MPI's own (not our polling's); the watchdog ends the job,
  // naming the measurement, should a rank die or hang in one.
  Watchdog watchdog(comm.options().watchdog_timeout());
  std::vector<int64_t> sizes;
  for (int64_t b = 4096; b <= std::max<int64_t>(max_bytes, 4096); b *= 4) sizes.push_back(b);
  // A ping-pong whose times do not grow with the message size (a host so busy that even the
  // lower quartile of each size's rounds is a time slice) is measured again; after kTries the
  // preset's link stays, and the note says why.
  constexpr int kTries = 3;
  int tries = 0;
  for (bool fitted = peer < 0; !fitted && tries < kTries; ++tries) {
    std::vector<double> secs;
    for (int64_t b : sizes) {
      Watchdog::Scope armed(watchdog, fmt::format("the link profile's ping-pong of {} bytes", b));
      secs.push_back(ping_pong(comm.world(), p.rank, peer, b, repeats));
    }
    int ok = 0;
    if (p.rank == 0) {
      const cost::LinkFit fit = cost::fit_link(sizes, secs);
      p.bandwidth = fit.bandwidth;
      p.latency_s = fit.latency_s;
      ok = fit.bandwidth > 0 ? 1 : 0;
      std::erase_if(p.samples, [](const LinkSample& x) { return x.kind == "p2p"; });
      for (size_t i = 0; i < sizes.size(); ++i) p.samples.push_back({"p2p", sizes[i], 2, secs[i]});
    }
    mpi_check(MPI_Bcast(&ok, 1, MPI_INT, 0, comm.world()), "profile broadcast");
    fitted = ok == 1;
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
  if (p.hosts > 1) {
    // Every pair of hosts, each wait with its own deadline naming the silent peer.
    const HostLinks measured = links_measure(comm.world(), comm.options().p2p_timeout_s);
    if (p.rank == 0) p.host_links = table_for_plans(host_link_table(measured));
    p.host_links_note = fmt::format(
        "measured between every pair of the {} hosts and inside each host running "
        "two ranks or more",
        p.hosts);
  } else {
    p.host_links_note = fmt::format(
        "all {} ranks run on one host ({}): nothing to measure between hosts, so the file has "
        "no host links; run profile under mpirun across the hosts to measure them",
        p.world, hosts.names[0]);
  }
  p.measured = true;
  if (p.rank != 0) return p;
  // The cost model's ring all-reduce with the fitted p2p link, against what MPI took.
  std::vector<double> err;
  if (p.bandwidth > 0 || !p.host_links.empty())
    for (size_t i = 0; i < ar_bytes.size(); ++i) {
      const double pred = allreduce_predicted(p, ar_bytes[i]);
      err.push_back(std::abs(pred - ar_seconds[i]) / ar_seconds[i]);
    }
  p.allreduce_median_error = median_of(err);
  p.allreduce_max_error = err.empty() ? 0 : *std::max_element(err.begin(), err.end());
  const std::string p2p_kept =
      peer < 0 || p.bandwidth > 0
          ? ""
          : fmt::format(
                "; the ping-pong's times did not grow with the message size in {} tries (is the "
                "host busy?), so the preset's link inside a host is kept",
                tries);
  if (p.hosts == 1)
    p.note = fmt::format("measured over MPI between {} ranks on this host{}", p.world, p2p_kept);
  else if (peer < 0)
    p.note = fmt::format(
        "all-reduce measured over MPI between {} ranks on {} hosts; rank 0 runs alone on {}, so "
        "the preset's link inside a host is kept",
        p.world, p.hosts, hosts.names[0]);
  else
    p.note = fmt::format(
        "point-to-point between ranks 0 and {} on {}, all-reduce between {} ranks on {} hosts{}",
        peer, hosts.names[0], p.world, p.hosts, p2p_kept);
  return p;
}

void apply_link_profile(const LinkProfile& p, cost::Coefficients& c) {
  if (!p.measured) return;
  // MPI's collectives here cost what their messages do: every row is the measured link.
  const auto rows = [&](double bandwidth, double latency) {
    return cost::link_table({bandwidth, bandwidth, latency, latency, bandwidth, latency},
                            "measured by infinipipe profile");
  };
  if (p.bandwidth > 0) {
    c.collectives.intra = rows(p.bandwidth, p.latency_s).intra;
    for (cost::CollectiveCost& r : c.collectives.inter)
      r.bus_bandwidth = std::min(r.bus_bandwidth, p.bandwidth);
  }
  // What prices a transfer between hosts without the table (the baselines, the layout search).
  const cost::HostLinkTable& t = p.host_links;
  double slowest = 0, latency = 0;
  for (size_t a = 0; a < t.hosts.size(); ++a)
    for (size_t b = a + 1; b < t.hosts.size(); ++b) {
      const cost::Link& l = t.between(static_cast<int64_t>(a), static_cast<int64_t>(b));
      slowest = slowest > 0 ? std::min(slowest, l.bandwidth) : l.bandwidth;
      latency = std::max(latency, l.latency_s);
    }
  if (slowest > 0) c.collectives.inter = rows(slowest, latency).inter;
}

}  // namespace infinipipe::profile
