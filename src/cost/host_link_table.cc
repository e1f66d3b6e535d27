#include "cost/host_link_table.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "cost/cost_model.h"

namespace infinipipe::cost {

namespace {

bool finite_at_least(double v, double lo) {
  return std::isfinite(v) && v >= lo;
}

using DirectedPair = std::pair<int64_t, int64_t>;  // (from host, to host)

// The link a transfer between two devices' hosts uses, before sharing.
Link link_between(const HostLinkTable& table, const Coefficients& c, int64_t a, int64_t b) {
  const Link& l = table.between(a, b);
  if (a != b || l.bandwidth > 0) return l;
  const CollectiveCost& r = c.collectives.row(Collective::send_recv, false);
  return {r.bus_bandwidth, r.call_latency_s};
}

// A link between two hosts carrying `flows` transfers at once gives each its share.
Link shared(Link l, int64_t flows) {
  l.bandwidth /= static_cast<double>(std::max<int64_t>(1, flows));
  return l;
}

std::vector<int64_t> grid_hosts(const HostLinkTable& table, const RankGrid& grid) {
  if (grid.pp < 1 || grid.dp < 1 || grid.ulysses < 1)
    fail("internal: rank grid pp {} x dp {} x ulysses {}", grid.pp, grid.dp, grid.ulysses);
  return table.host_of_ranks(grid.devices());
}

// The devices of pipeline rank `stage`, in ring order.
std::vector<int64_t> stage_ring(const RankGrid& grid, int64_t stage) {
  std::vector<int64_t> out;
  for (int64_t r = 0; r < grid.dp; ++r)
    for (int64_t j = 0; j < grid.ulysses; ++j) out.push_back(grid.device_of(stage, r, j));
  return out;
}

}  // namespace

int64_t HostLinkTable::slots() const {
  int64_t n = 0;
  for (const ClusterHost& h : hosts) n += h.slots;
  return n;
}

void HostLinkTable::validate() const {
  std::set<std::string> names;
  for (const ClusterHost& h : hosts) {
    if (h.name.empty()) fail("host links: a host without a name");
    if (!names.insert(h.name).second) fail("host links: host {} is listed twice", h.name);
    if (h.slots < 1) fail("host links: host {} runs {} ranks; at least 1", h.name, h.slots);
  }
  const size_t n = hosts.size();
  std::vector<int64_t> placed(n, 0);
  for (int64_t h : host_of_rank) {
    if (h < 0 || h >= static_cast<int64_t>(n))
      fail("host links: a rank on host {}, but there are {} hosts", h, n);
    ++placed[static_cast<size_t>(h)];
  }
  for (size_t h = 0; h < n && !host_of_rank.empty(); ++h)
    if (placed[h] != hosts[h].slots)
      fail("host links: {} runs {} ranks of the job, but {} slots are listed", hosts[h].name,
           placed[h], hosts[h].slots);
  if (links.size() != n * n)
    fail("host links: {} links for {} hosts, want {} (hosts x hosts)", links.size(), n, n * n);
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      const Link& l = between(static_cast<int64_t>(a), static_cast<int64_t>(b));
      const Link& back = between(static_cast<int64_t>(b), static_cast<int64_t>(a));
      // Inside a host 0 means not measured; between two hosts it must be measured.
      if (!finite_at_least(l.bandwidth, 0) || (a != b && !(l.bandwidth > 0)) ||
          !finite_at_least(l.latency_s, 0))
        fail(
            "host links: {} -> {} has bandwidth {} B/s and latency {} s; both must be finite "
            "and >= 0, the bandwidth between two hosts positive",
            hosts[a].name, hosts[b].name, l.bandwidth, l.latency_s);
      if (l.bandwidth != back.bandwidth || l.latency_s != back.latency_s)
        fail("host links: {} -> {} differs from {} -> {}; the table is symmetric", hosts[a].name,
             hosts[b].name, hosts[b].name, hosts[a].name);
    }
  }
}

std::vector<int64_t> HostLinkTable::host_of_ranks(int64_t ranks) const {
  if (!host_of_rank.empty()) {
    if (static_cast<int64_t>(host_of_rank.size()) != ranks)
      fail_config("the links were measured for a job of {} ranks, not {}", host_of_rank.size(),
                  ranks);
    return host_of_rank;
  }
  if (ranks > slots())
    fail_config(
        "{} ranks do not fit the {} slots of the measured hosts ({}); measure the links of the "
        "cluster the job runs on",
        ranks, slots(), hosts.size());
  std::vector<int64_t> out;
  for (size_t h = 0; h < hosts.size() && static_cast<int64_t>(out.size()) < ranks; ++h)
    for (int64_t s = 0; s < hosts[h].slots && static_cast<int64_t>(out.size()) < ranks; ++s)
      out.push_back(static_cast<int64_t>(h));
  return out;
}

std::vector<std::string> HostLinkTable::describe() const {
  std::vector<std::string> out;
  const auto line = [&](size_t a, size_t b, const std::string& what) {
    const Link& l = between(static_cast<int64_t>(a), static_cast<int64_t>(b));
    if (l.bandwidth > 0)
      out.push_back(
          fmt::format("{}: {:.1f} MB/s, {:.0f} us", what, l.bandwidth / 1e6, l.latency_s * 1e6));
  };
  for (size_t a = 0; a < hosts.size(); ++a)
    for (size_t b = a + 1; b < hosts.size(); ++b)
      line(a, b, fmt::format("{} <-> {}", hosts[a].name, hosts[b].name));
  for (size_t a = 0; a < hosts.size(); ++a) line(a, a, fmt::format("inside {}", hosts[a].name));
  return out;
}

RankGrid config_rank_grid(const Config& cfg) {
  if (cfg.parallel.rank_placement == RankPlacement::auto_)
    fail_config(
        "--rank-placement auto is chosen by `infinipipe train`, or by plan and simulate from "
        "measured host links; give megatron or pipelines here");
  RankGrid g;
  g.pp = cfg.parallel.pipeline_parallel;
  g.dp = cfg.parallel.data_parallel;
  g.ulysses = cfg.parallel.ulysses_degree;
  g.order = cfg.parallel.rank_placement == RankPlacement::pipelines ? RankOrder::pipelines
                                                                    : RankOrder::megatron;
  return g;
}

PipelineLinks host_pipeline_links(const HostLinkTable& table, const Coefficients& c,
                                  const RankGrid& grid, int64_t replica) {
  const std::vector<int64_t> host = grid_hosts(table, grid);
  const auto host_of = [&](int64_t stage, int64_t r) {
    return host[static_cast<size_t>(grid.device_of(stage, r, 0))];
  };
  std::map<DirectedPair, int64_t> flows;
  for (int64_t r = 0; r < grid.dp; ++r) {
    for (int64_t s = 0; s + 1 < grid.pp; ++s) {
      const int64_t a = host_of(s, r), b = host_of(s + 1, r);
      if (a == b) continue;
      ++flows[{a, b}];
      ++flows[{b, a}];  // the gradients coming back
    }
  }
  PipelineLinks out;
  out.pp = grid.pp;
  out.pair.resize(static_cast<size_t>(grid.pp * grid.pp));
  for (int64_t from = 0; from < grid.pp; ++from) {
    for (int64_t to = 0; to < grid.pp; ++to) {
      if (from == to) continue;
      const int64_t a = host_of(from, replica), b = host_of(to, replica);
      const Link l = link_between(table, c, a, b);
      const auto it = flows.find({a, b});
      out.pair[static_cast<size_t>(from * grid.pp + to)] =
          a == b ? l : shared(l, it == flows.end() ? 1 : it->second);
    }
  }
  return out;
}

double host_allreduce_time(const HostLinkTable& table, const Coefficients& c, const RankGrid& grid,
                           int64_t stage, double bytes) {
  const int64_t n = grid.dp * grid.ulysses;
  if (n <= 1 || bytes <= 0) return 0.0;
  const std::vector<int64_t> host = grid_hosts(table, grid);
  const auto edge_hosts = [&](const std::vector<int64_t>& ring, size_t i) {
    return DirectedPair{host[static_cast<size_t>(ring[i])],
                        host[static_cast<size_t>(ring[(i + 1) % ring.size()])]};
  };
  std::map<DirectedPair, int64_t> flows;
  for (int64_t s = 0; s < grid.pp; ++s) {
    const std::vector<int64_t> ring = stage_ring(grid, s);
    for (size_t i = 0; i < ring.size(); ++i) {
      const DirectedPair e = edge_hosts(ring, i);
      if (e.first != e.second) ++flows[e];
    }
  }
  const std::vector<int64_t> ring = stage_ring(grid, stage);
  double bandwidth = 0, latency = 0;
  for (size_t i = 0; i < ring.size(); ++i) {
    const DirectedPair e = edge_hosts(ring, i);
    Link l = link_between(table, c, e.first, e.second);
    if (e.first != e.second) l = shared(l, flows[e]);
    bandwidth = i == 0 ? l.bandwidth : std::min(bandwidth, l.bandwidth);
    latency = std::max(latency, l.latency_s);
  }
  const double k = static_cast<double>(n);
  return 2.0 * ((k - 1) / k * bytes / bandwidth + (k - 1) * latency);
}

}  // namespace infinipipe::cost
