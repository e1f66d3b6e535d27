#include "runtime/cost_loop_mpi.h"

#include <cstdio>
#include <span>
#include <string>

#include <fmt/format.h>

#include "comm/mpi_allreduce.h"
#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "comm/mpi_links.h"
#include "comm/mpi_node.h"
#include "comm/mpi_text.h"
#include "core/error.h"

namespace infinipipe::runtime {

CostLoopRank cost_loop_rank(const Config& cfg, const ProcessGroups* groups) {
  CostLoopRank r;
  r.pp = cfg.parallel.pipeline_parallel;
  r.dp = cfg.parallel.data_parallel;
  if (groups == nullptr) return r;
  r.distributed = true;
  r.stage = groups->layout().stage;
  r.replica = groups->layout().replica;
  return r;
}

CostLoopCollectives cost_loop_collectives(const ProcessGroups* groups, double timeout_s) {
  if (groups == nullptr) return {};
  CostLoopCollectives c;
  c.pipeline_sum = [groups, timeout_s](std::span<double> values, const std::string& what) {
    allreduce_sum(groups->pp_comm(), values, timeout_s, what);
  };
  c.world_sum = [groups, timeout_s](std::span<double> values, const std::string& what) {
    allreduce_sum(groups->world(), values, timeout_s, what);
  };
  c.replicas_gather = [groups, timeout_s](const std::string& mine, const std::string& what) {
    return mpi_text_gather(groups->dp_comm(), mine, timeout_s, what,
                           "a replica of this stage may have died or hung");
  };
  return c;
}

std::vector<cost::RankHost> pipeline_rank_hosts(const ProcessGroups& groups, double timeout_s) {
  const NodeRanks mine = node_ranks(groups.world(), timeout_s);
  const size_t pp = static_cast<size_t>(groups.layout().pp);
  std::vector<int64_t> all(pp * 3, 0);
  const size_t at = static_cast<size_t>(groups.layout().stage) * 3;
  all[at] = mine.node;
  all[at + 1] = mine.cores;
  all[at + 2] = mine.ranks;
  allreduce_sum(groups.pp_comm(), std::span<int64_t>(all), timeout_s,
                "the nodes of the pipeline's ranks");
  std::vector<cost::RankHost> out;
  for (size_t r = 0; r < pp; ++r) out.push_back({all[r * 3], all[r * 3 + 1], all[r * 3 + 2]});
  return out;
}

cost::PipelineLinks pipeline_links_measured(const ProcessGroups& groups, double timeout_s) {
  const HostLinks links = links_measure(groups.world(), timeout_s);
  if (groups.comm().rank() == 0) {
    for (const std::string& line : links.describe()) fmt::print("link {}\n", line);
    std::fflush(stdout);
  }
  const RankLayout& layout = groups.layout();
  cost::PipelineLinks out;
  out.pp = layout.pp;
  out.pair.resize(static_cast<size_t>(layout.pp * layout.pp));
  for (int a = 0; a < layout.pp; ++a) {
    for (int b = 0; b < layout.pp; ++b) {
      if (a == b) continue;
      const int64_t ha = links.host_of_rank[static_cast<size_t>(layout.rank_of(a, layout.replica))];
      const int64_t hb = links.host_of_rank[static_cast<size_t>(layout.rank_of(b, layout.replica))];
      const size_t k = links.at(ha, hb);
      if (links.bandwidth[k] <= 0)
        fail(
            "--measure-links: the link between {} and {} was not measured (a host running one "
            "rank cannot measure its own link)",
            links.hosts[static_cast<size_t>(ha)], links.hosts[static_cast<size_t>(hb)]);
      out.pair[static_cast<size_t>(a * layout.pp + b)] = {links.bandwidth[k], links.latency_s[k]};
    }
  }
  return out;
}

}  // namespace infinipipe::runtime
