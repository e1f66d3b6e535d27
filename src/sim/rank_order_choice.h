// Planning on measured host links (cost/host_link_table.h): every data-parallel replica plans and
// simulates with the links its own pipeline crosses in the configured rank order, and
// `--rank-placement auto` plans and simulates the batch in both orders and keeps the faster
// (`plan`, `simulate`; docs/cost-model.md, "Links between hosts"): the rule by predicted time
// that setup/rank_order.h, the one decider of the order, applies where links are measured.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::sim {

// cfg with --rank-placement set to `order`.
Config config_with_rank_order(Config cfg, RankOrder order);

// The model replica `replica` plans and simulates with: with host links, its pipeline's links in
// cfg's rank order (ConfigError for `auto`, which rank_order_choose resolves first); without,
// `cm` itself.
cost::CostModel replica_cost_model(const cost::CostModel& cm, const Config& cfg, int64_t replica);

struct OrderSteps {
  RankOrder order = RankOrder::megatron;
  std::vector<double> replica_steps;  // each replica's predicted step
  double step_s = 0;                  // the slowest replica's: the step of the job
  double tokens_per_s = 0;            // the global batch's tokens per step_s
};

struct RankOrderChoice {
  RankOrder order = RankOrder::megatron;
  OrderSteps megatron, pipelines;
  std::string reason;  // one line for the user: the order, both steps and tokens/s
};

// Plans every replica's share (`shares[r]`, dp of them) with `schedule` in Megatron's order and
// with pipelines on adjacent ranks, each replica on its own links (replica_cost_model), simulates
// them, and keeps the order whose slowest replica finishes first, Megatron's on a tie. With pp 1
// or dp 1 the two orders are one: nothing is planned. Error when `cm` has no host links.
RankOrderChoice rank_order_choose(const Config& cfg, const cost::CostModel& cm,
                                  const std::vector<std::vector<int64_t>>& shares,
                                  Schedule schedule, int32_t threads = 1);

}  // namespace infinipipe::sim
