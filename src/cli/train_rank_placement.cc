#include "cli/train_rank_placement.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_hosts.h"
#include "comm/rank_placement.h"
#include "cost/cost_model.h"

namespace infinipipe {

RankOrder train_rank_order(const Config& cfg, const Comm& comm, bool print) {
  if (cfg.parallel.rank_placement == RankPlacement::megatron) return RankOrder::megatron;
  if (cfg.parallel.rank_placement == RankPlacement::pipelines) return RankOrder::pipelines;
  std::vector<std::string> names;
  std::vector<int64_t> host_of_rank;
  for (int r = 0; r < comm.size(); ++r) {
    const std::string h = rank_host(r);
    auto it = std::find(names.begin(), names.end(), h);
    if (it == names.end()) it = names.insert(names.end(), h);
    host_of_rank.push_back(static_cast<int64_t>(it - names.begin()));
  }
  const int pp = static_cast<int>(cfg.parallel.pipeline_parallel);
  const int dp = static_cast<int>(cfg.parallel.data_parallel);
  // fp32 gradients of one stage's share of the parameters; a hop carries a replica's tokens
  // (at most its sequences at full length) forward and their gradients back.
  const double allreduce_bytes = 4.0 * static_cast<double>(cfg.model.params_total()) / pp;
  const double tokens = static_cast<double>(cfg.training.global_batch_size) *
                        static_cast<double>(cfg.model.seq_length) / dp;
  const double hop_bytes =
      2.0 * tokens * cost::CostModel::from_config(cfg).coefficients().p2p_bytes_per_token;
  const PlacementChoice c = rank_placement_choose(host_of_rank, pp, dp, allreduce_bytes, hop_bytes);
  if (print) {
    // Measured links on two hosts or more were ranked by the layout search before the groups
    // (train_auto_layout.h); here the ranks are on one host, or nothing was measured.
    fmt::print("rank placement auto: {}{}\n", c.reason,
               cfg.cluster.measure_links
                   ? ""
                   : "; ranked by the bytes that cross hosts, as no link was measured "
                     "(--measure-links ranks the orders by predicted time)");
    std::fflush(stdout);
  }
  return c.order;
}

}  // namespace infinipipe
