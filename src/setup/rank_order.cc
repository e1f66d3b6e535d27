#include "setup/rank_order.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "setup/rank_order_bytes.h"
#include "sim/layout_search_report.h"
#include "sim/rank_order_choice.h"

namespace infinipipe::setup {
namespace {

// A host index per world rank, in order of first appearance; one host when none is named.
std::vector<int64_t> host_indices(const std::vector<std::string>& rank_hosts, int64_t world) {
  if (rank_hosts.empty()) return std::vector<int64_t>(static_cast<size_t>(world), 0);
  if (static_cast<int64_t>(rank_hosts.size()) != world)
    fail_config("the rank order is decided for pp x dp = {} ranks, but {} host names were given",
                world, rank_hosts.size());
  std::vector<std::string> names;
  std::vector<int64_t> out;
  for (const std::string& h : rank_hosts) {
    auto it = std::find(names.begin(), names.end(), h);
    if (it == names.end()) it = names.insert(names.end(), h);
    out.push_back(static_cast<int64_t>(it - names.begin()));
  }
  return out;
}

RankOrderDecision by_bytes(const Config& cfg, const RankOrderQuestion& q) {
  const int pp = static_cast<int>(cfg.parallel.pipeline_parallel);
  const int dp = static_cast<int>(cfg.parallel.data_parallel);
  // fp32 gradients of one stage's share of the parameters; a hop carries a replica's tokens
  // (at most its sequences at full length) forward and their gradients back.
  const double allreduce_bytes = 4.0 * static_cast<double>(cfg.model.params_total()) / pp;
  const double tokens = static_cast<double>(cfg.training.global_batch_size) *
                        static_cast<double>(cfg.model.seq_length) / dp;
  const double hop_bytes =
      2.0 * tokens * cost::CostModel::from_config(cfg).coefficients().p2p_bytes_per_token;
  const PlacementChoice c = rank_placement_choose(host_indices(q.rank_hosts, int64_t{pp} * dp), pp,
                                                  dp, allreduce_bytes, hop_bytes);
  // With --measure-links on one host nothing was ranked by time: the bytes decided, and say no
  // more. Without it, say which rule chose and what would rank by time.
  std::string rule;
  if (!q.runtime_measures_links)
    rule =
        "; ranked by the bytes that cross hosts, as no link was measured (the PyTorch trainer "
        "measures none; `infinipipe train --measure-links` ranks the orders by predicted time)";
  else if (!cfg.cluster.measure_links)
    rule =
        "; ranked by the bytes that cross hosts, as no link was measured (--measure-links ranks "
        "the orders by predicted time)";
  return {c.order, true, c.reason + rule};
}

RankOrderDecision by_time(const Config& cfg, const MeasuredOrders& m) {
  if (m.search) {
    const sim::LayoutResult* best = m.search->best();
    if (!best) fail("internal: the rank order is read from a layout search that found no layout");
    return {best->layout.order, true,
            fmt::format("{}; ranked by predicted time with the measured links ({}) on {} sampled "
                        "batch(es)",
                        sim::layout_search_order_reason(*m.search), m.links, m.search->batches)};
  }
  if (!m.cm || !m.shares)
    fail("internal: the rank order by predicted time needs a cost model and the replicas' shares");
  const sim::RankOrderChoice c =
      sim::rank_order_choose(cfg, *m.cm, *m.shares, m.schedule, m.threads);
  return {c.order, true, c.reason};
}

}  // namespace

RankOrderDecision decide_rank_order(const Config& cfg, const RankOrderQuestion& q) {
  switch (cfg.parallel.rank_placement) {
    case RankPlacement::megatron:
      return {RankOrder::megatron, false, "Megatron's order, given by --rank-placement"};
    case RankPlacement::pipelines:
      return {RankOrder::pipelines, false,
              "pipelines on adjacent ranks, given by --rank-placement"};
    case RankPlacement::auto_:
      break;
  }
  return q.measured ? by_time(cfg, *q.measured) : by_bytes(cfg, q);
}

Config config_with_rank_order(Config cfg, RankOrder order) {
  return sim::config_with_rank_order(std::move(cfg), order);
}

}  // namespace infinipipe::setup
