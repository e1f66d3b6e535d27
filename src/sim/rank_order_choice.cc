#include "sim/rank_order_choice.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "cost/host_link_table.h"
#include "plan/planner.h"
#include "sim/simulator.h"

namespace infinipipe::sim {
namespace {

const char* order_words(RankOrder o) {
  return o == RankOrder::pipelines ? "pipelines on adjacent ranks (rank = replica x pp + stage)"
                                   : "Megatron's order (rank = stage x dp + replica)";
}

OrderSteps order_steps(const Config& cfg, const cost::CostModel& cm,
                       const std::vector<std::vector<int64_t>>& shares, Schedule schedule,
                       int32_t threads, RankOrder order) {
  const Config ordered = config_with_rank_order(cfg, order);
  OrderSteps out;
  out.order = order;
  int64_t tokens = 0;
  for (size_t r = 0; r < shares.size(); ++r) {
    const cost::CostModel mine = replica_cost_model(cm, ordered, static_cast<int64_t>(r));
    const plan::PlanResult p =
        plan::make_plan_detailed(ordered, mine, shares[r], schedule, threads);
    const double step = simulate(p.plan, mine, ordered).step_time;
    out.replica_steps.push_back(step);
    out.step_s = std::max(out.step_s, step);
    for (int64_t l : shares[r]) tokens += l;
  }
  out.tokens_per_s = out.step_s > 0 ? static_cast<double>(tokens) / out.step_s : 0;
  return out;
}

}  // namespace

Config config_with_rank_order(Config cfg, RankOrder order) {
  cfg.parallel.rank_placement =
      order == RankOrder::pipelines ? RankPlacement::pipelines : RankPlacement::megatron;
  return cfg;
}

cost::CostModel replica_cost_model(const cost::CostModel& cm, const Config& cfg, int64_t replica) {
  if (cm.host_links().empty()) return cm;
  return cm.with_replica_links(cost::config_rank_grid(cfg), replica);
}

RankOrderChoice rank_order_choose(const Config& cfg, const cost::CostModel& cm,
                                  const std::vector<std::vector<int64_t>>& shares,
                                  Schedule schedule, int32_t threads) {
  if (cm.host_links().empty())
    fail("internal: the rank order is chosen on measured host links, and the cost model has none");
  RankOrderChoice c;
  if (cfg.parallel.pipeline_parallel == 1 || cfg.parallel.data_parallel == 1) {
    c.reason = fmt::format("{}: with pp {} and dp {} both orders place the ranks alike",
                           order_words(c.order), cfg.parallel.pipeline_parallel,
                           cfg.parallel.data_parallel);
    return c;
  }
  c.megatron = order_steps(cfg, cm, shares, schedule, threads, RankOrder::megatron);
  c.pipelines = order_steps(cfg, cm, shares, schedule, threads, RankOrder::pipelines);
  c.order = c.pipelines.step_s < c.megatron.step_s ? RankOrder::pipelines : RankOrder::megatron;
  const OrderSteps& kept = c.order == RankOrder::pipelines ? c.pipelines : c.megatron;
  const OrderSteps& other = c.order == RankOrder::pipelines ? c.megatron : c.pipelines;
  c.reason = fmt::format(
      "{}: predicted step {:.3f} s, {:.0f} tokens/s, against {:.3f} s, {:.0f} tokens/s {} (the "
      "slowest of {} replicas, each on the measured links its pipeline crosses{})",
      order_words(c.order), kept.step_s, kept.tokens_per_s, other.step_s, other.tokens_per_s,
      other.order == RankOrder::pipelines ? "with pipelines on adjacent ranks"
                                          : "in Megatron's order",
      shares.size(), kept.step_s == other.step_s ? "; a tie keeps Megatron's" : "");
  return c;
}

}  // namespace infinipipe::sim
