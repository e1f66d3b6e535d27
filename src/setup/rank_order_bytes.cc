#include "setup/rank_order_bytes.h"

#include <set>

#include <fmt/format.h>

#include "core/error.h"

namespace infinipipe::setup {

namespace {

// Bytes between hosts per iteration with this order: a ring all-reduce over n ranks on h > 1
// hosts crosses a host boundary h times, 2 (n - 1) / n of the buffer each; a pipeline hop
// between two hosts carries hop_bytes.
double cross_bytes(const std::vector<int64_t>& host_of_rank, int pp, int dp, RankOrder order,
                   double allreduce_bytes, double hop_bytes) {
  RankLayout l;
  l.pp = pp;
  l.dp = dp;
  l.order = order;
  double out = 0;
  for (int s = 0; s < pp && dp > 1; ++s) {
    std::set<int64_t> hosts;
    for (int r = 0; r < dp; ++r) hosts.insert(host_of_rank[static_cast<size_t>(l.rank_of(s, r))]);
    if (hosts.size() > 1)
      out += static_cast<double>(hosts.size()) * 2.0 * (dp - 1) / dp * allreduce_bytes;
  }
  for (int r = 0; r < dp; ++r) {
    for (int s = 0; s + 1 < pp; ++s) {
      if (host_of_rank[static_cast<size_t>(l.rank_of(s, r))] !=
          host_of_rank[static_cast<size_t>(l.rank_of(s + 1, r))])
        out += hop_bytes;
    }
  }
  return out;
}

}  // namespace

PlacementChoice rank_placement_choose(const std::vector<int64_t>& host_of_rank, int pp, int dp,
                                      double allreduce_bytes, double hop_bytes) {
  if (pp < 1 || dp < 1 || host_of_rank.size() != static_cast<size_t>(pp) * dp)
    fail("internal: rank placement for {} ranks with pp {} x dp {}", host_of_rank.size(), pp, dp);
  PlacementChoice c;
  c.megatron_cross_bytes =
      cross_bytes(host_of_rank, pp, dp, RankOrder::megatron, allreduce_bytes, hop_bytes);
  c.pipelines_cross_bytes =
      cross_bytes(host_of_rank, pp, dp, RankOrder::pipelines, allreduce_bytes, hop_bytes);
  const std::set<int64_t> hosts(host_of_rank.begin(), host_of_rank.end());
  const std::string sizes =
      fmt::format("gradient all-reduce {:.1f} MB per rank, pipeline hop {:.1f} MB per iteration",
                  allreduce_bytes / 1e6, hop_bytes / 1e6);
  if (hosts.size() < 2) {
    c.reason = fmt::format("Megatron's order: all {} ranks run on one host, nothing crosses",
                           host_of_rank.size());
    return c;
  }
  if (c.pipelines_cross_bytes < c.megatron_cross_bytes) {
    c.order = RankOrder::pipelines;
    c.reason = fmt::format(
        "pipelines on adjacent ranks (rank = replica x pp + stage): {:.1f} MB per iteration "
        "cross hosts, against {:.1f} MB in Megatron's order ({})",
        c.pipelines_cross_bytes / 1e6, c.megatron_cross_bytes / 1e6, sizes);
  } else {
    c.reason = fmt::format(
        "Megatron's order (rank = stage x dp + replica): {:.1f} MB per iteration cross hosts, "
        "against {:.1f} MB with pipelines on adjacent ranks ({})",
        c.megatron_cross_bytes / 1e6, c.pipelines_cross_bytes / 1e6, sizes);
  }
  return c;
}

}  // namespace infinipipe::setup
