#include "comm/mpi_links.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "comm/mpi_hosts.h"

namespace infinipipe {

namespace {

constexpr int kTag = 7301;
constexpr int kLatencyRounds = 20;
constexpr int kBandwidthRounds = 4;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void exchange(MPI_Comm world, void* send, int send_n, void* recv, int recv_n, int peer,
              bool send_first, double timeout_s, const std::string& what) {
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  if (send_first) {
    mpi_check(MPI_Isend(send, send_n, MPI_BYTE, peer, kTag, world, &req[0]), what);
    mpi_check(MPI_Irecv(recv, recv_n, MPI_BYTE, peer, kTag, world, &req[1]), what);
  } else {
    mpi_check(MPI_Irecv(recv, recv_n, MPI_BYTE, peer, kTag, world, &req[1]), what);
  }
  if (!send_first) {
    mpi_wait_deadline({&req[1], 1}, {}, timeout_s,
                      {what, fmt::format("rank {} may have died or hung", peer), {peer}});
    mpi_check(MPI_Isend(send, send_n, MPI_BYTE, peer, kTag, world, &req[0]), what);
    mpi_wait_deadline({&req[0], 1}, {}, timeout_s,
                      {what, fmt::format("rank {} may have died or hung", peer), {peer}});
    return;
  }
  mpi_wait_deadline(req, {}, timeout_s,
                    {what, fmt::format("rank {} may have died or hung", peer), {peer}});
}

// Ping-pong between ranks a (measures) and b (echoes): {bandwidth, latency} on rank a.
std::pair<double, double> ping_pong(MPI_Comm world, int me, int a, int b, int64_t bytes,
                                    double timeout_s) {
  const bool measuring = me == a;
  const int peer = measuring ? b : a;
  const std::string what = fmt::format("the link measurement between ranks {} and {}", a, b);
  char small_out[8] = {}, small_in[8] = {};
  std::vector<char> big(static_cast<size_t>(bytes), 1);
  const int n = mpi_count(bytes, what);
  // One round to connect (TCP connections open on first use), then the timed rounds. Medians,
  // not means: on a busy machine a round that waited for a core would otherwise set the link.
  std::vector<double> latencies;
  for (int round = 0; round <= kLatencyRounds; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    exchange(world, small_out, 8, small_in, 8, peer, measuring, timeout_s, what);
    if (round > 0) latencies.push_back(seconds_since(t0) / 2);
  }
  const double latency = median(latencies);
  // Big one way, small back: each round is one transfer and a latency.
  std::vector<double> rounds;
  for (int round = 0; round <= kBandwidthRounds; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    if (measuring) {
      exchange(world, big.data(), n, small_in, 8, peer, true, timeout_s, what);
    } else {
      exchange(world, small_out, 8, big.data(), n, peer, false, timeout_s, what);
    }
    if (round > 0) rounds.push_back(seconds_since(t0));
  }
  // The transfer is the round less its two latencies; where noise leaves less than half the
  // round, the whole round (a bandwidth too low rather than one a million times too high).
  const double round_s = median(rounds);
  const double per = round_s - 2 * latency > round_s / 2 ? round_s - 2 * latency : round_s;
  return {static_cast<double>(bytes) / per, latency};
}

}  // namespace

std::vector<std::string> HostLinks::describe() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < hosts.size(); ++i) {
    for (size_t j = i; j < hosts.size(); ++j) {
      const size_t k = at(static_cast<int64_t>(i), static_cast<int64_t>(j));
      if (bandwidth[k] <= 0) continue;
      out.push_back(fmt::format("{} <-> {}: {:.0f} MB/s, {:.0f} us", hosts[i], hosts[j],
                                bandwidth[k] / 1e6, latency_s[k] * 1e6));
    }
  }
  return out;
}

HostLinks links_measure(MPI_Comm world, double timeout_s, int64_t bytes) {
  int me = 0, size = 0;
  MPI_Comm_rank(world, &me);
  MPI_Comm_size(world, &size);
  HostLinks out;
  std::vector<std::vector<int>> ranks_on;  // by host
  for (int r = 0; r < size; ++r) {
    const std::string h = rank_host(r);
    auto it = std::find(out.hosts.begin(), out.hosts.end(), h);
    if (it == out.hosts.end()) {
      out.hosts.push_back(h);
      ranks_on.emplace_back();
      it = out.hosts.end() - 1;
    }
    const auto idx = static_cast<int64_t>(it - out.hosts.begin());
    out.host_of_rank.push_back(idx);
    ranks_on[static_cast<size_t>(idx)].push_back(r);
  }
  const size_t n = out.hosts.size();
  out.bandwidth.assign(n * n, 0.0);
  out.latency_s.assign(n * n, 0.0);
  // Pairs in the same order on every rank; only the two ranks of a pair take part in it.
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i; j < n; ++j) {
      const int a = ranks_on[i][0];
      int b = -1;
      if (i != j)
        b = ranks_on[j][0];
      else if (ranks_on[i].size() > 1)
        b = ranks_on[i][1];
      if (b < 0 || (me != a && me != b)) continue;
      const auto [bw, lat] = ping_pong(world, me, a, b, bytes, timeout_s);
      if (me == a) {
        out.bandwidth[i * n + j] = out.bandwidth[j * n + i] = bw;
        out.latency_s[i * n + j] = out.latency_s[j * n + i] = lat;
      }
    }
  }
  // Only a pair's measuring rank has its numbers: the sum gives everyone all of them.
  for (std::vector<double>* v : {&out.bandwidth, &out.latency_s}) {
    MPI_Request req = MPI_REQUEST_NULL;
    mpi_check(MPI_Iallreduce(MPI_IN_PLACE, v->data(), static_cast<int>(v->size()), MPI_DOUBLE,
                             MPI_SUM, world, &req),
              "sharing the measured links");
    mpi_wait_deadline({&req, 1}, {}, timeout_s,
                      {"the measured links of every pair of hosts",
                       "a rank may have died or hung while measuring", comm_peers(world)});
  }
  return out;
}

}  // namespace infinipipe
