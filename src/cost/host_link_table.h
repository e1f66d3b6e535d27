// The hosts a job runs on and the links between them, as measured (comm/mpi_links.h: `train
// --measure-links` at start, `infinipipe profile` under mpirun). With them a transfer is priced
// by the link it really crosses — a pipeline hop by the hosts of its two ranks, a data-parallel
// all-reduce by the slowest link of its ring — and the flows that cross one link between hosts at
// the same time share it. Without them, the coefficients' two global links (intra-node,
// inter-node) price every transfer. docs/cost-model.md, "Links between hosts".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/pipeline_links.h"

namespace infinipipe::cost {

struct Coefficients;

struct ClusterHost {
  std::string name;
  int64_t slots = 0;  // ranks it runs; mpirun fills the hosts in order (--map-by slot)
};

struct HostLinkTable {
  std::vector<ClusterHost> hosts;
  // hosts × hosts, one direction, symmetric. [h][h]: between two ranks of host h; bandwidth 0
  // there means not measured (a host running one rank): the coefficients' intra-node link.
  std::vector<Link> links;
  // A running job's host of each world rank, as measured (mpirun may place ranks round-robin);
  // empty: the ranks fill the hosts' slots in order.
  std::vector<int64_t> host_of_rank;

  bool empty() const { return hosts.empty(); }
  int64_t slots() const;
  const Link& between(int64_t a, int64_t b) const {
    return links[static_cast<size_t>(a) * hosts.size() + static_cast<size_t>(b)];
  }
  // Throws Error naming the host or pair when a name is empty or repeated, slots < 1, the table
  // is not hosts × hosts or asymmetric, or a link between two hosts lacks a positive finite
  // bandwidth or a finite latency >= 0.
  void validate() const;
  // The host of each of `ranks` world ranks: host_of_rank when given (ConfigError unless it
  // has `ranks` entries), else the hosts filled in order (ConfigError when the ranks outnumber
  // the slots).
  std::vector<int64_t> host_of_ranks(int64_t ranks) const;
  // "host-a <-> host-b: 117.0 MB/s, 52 us", one line per measured pair, then one per host inside.
  std::vector<std::string> describe() const;
};

// Which devices play which part: pp × dp ranks in `order`, each a Ulysses group of `ulysses`
// consecutive devices (device = rank × ulysses + member).
struct RankGrid {
  int64_t pp = 1;
  int64_t dp = 1;
  int64_t ulysses = 1;
  RankOrder order = RankOrder::megatron;
  int64_t devices() const { return pp * dp * ulysses; }
  int64_t device_of(int64_t stage, int64_t replica, int64_t member) const {
    return rank_in_order(order, pp, dp, stage, replica) * ulysses + member;
  }
};

// pp, dp and the Ulysses degree of `cfg` in the order --rank-placement names. ConfigError for
// `auto`, which whoever plans resolves first (it needs the links and a workload).
RankGrid config_rank_grid(const Config& cfg);

// The links of replica `replica`'s pipeline by pipeline rank (each rank's first device). A link
// between two hosts is shared by every pipeline hop of the step that crosses it in the same
// direction (the replicas run the same schedule, so their sends overlap); inside a host a hop
// gets the host's measured link, or the coefficients' intra-node one.
PipelineLinks host_pipeline_links(const HostLinkTable& table, const Coefficients& c,
                                  const RankGrid& grid, int64_t replica);

// Ring all-reduce of `bytes` (the whole buffer) over the dp × ulysses devices of pipeline rank
// `stage`, ring in device order: 2(n−1)/n · bytes / B + 2(n−1) · latency, with B the slowest
// edge of the ring after sharing each link between hosts with every stage's ring that crosses it
// in the same direction (all stages reduce at the end of the step), and the largest latency.
double host_allreduce_time(const HostLinkTable& table, const Coefficients& c, const RankGrid& grid,
                           int64_t stage, double bytes);

}  // namespace infinipipe::cost
