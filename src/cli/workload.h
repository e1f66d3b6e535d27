// The workload options `plan` and `simulate` share (cmd_plan.cc): which global batch, and the
// replicas' shares of it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "options/cli11_fwd.h"

#include "core/config.h"
#include "cost/cost_model.h"
#include "plan/planner.h"

namespace infinipipe::cli {

struct Workload {
  std::vector<int64_t> global;               // the global batch's lengths
  std::vector<std::vector<int64_t>> shares;  // per replica (balance_replicas); one when dp = 1
  int64_t replica = 0;                       // --replica; -1 = all
  std::string delay_note;  // with --outlier-delay: what the delay did to this batch
  const std::vector<int64_t>& share() const {
    return shares[static_cast<size_t>(replica < 0 ? 0 : replica)];
  }
};

struct WorkloadLoader {
  // The global batch of --iteration and every replica's share of it (balanced by cost over dp).
  std::function<Workload(const Config&, const cost::CostModel&)> share;
  // --replica: the replica index, -1 for 'all' (ConfigError outside the dp replicas).
  std::function<int64_t(const Config&)> replica;
  // `count` consecutive global batches from --iteration on (the layout search's sample).
  std::function<std::vector<std::vector<int64_t>>(const Config&, int64_t count)> batches;
};

// Adds --lengths / --distribution / --iteration / --replica to `cmd`.
WorkloadLoader add_workload_options(CLI::App* cmd);

// Plans and simulates every replica's share with `schedule`, each on its own pipeline's links
// when `cm` has host links (sim/rank_order_choice.h); prints one line per replica, then
// "replicas: slowest X s, mean Y s, slowest/mean Z". Returns the plans, replica order.
std::vector<plan::PlanResult> plan_every_replica(const Config& cfg, const cost::CostModel& cm,
                                                 const Workload& w, Schedule schedule,
                                                 int32_t threads = 1);

}  // namespace infinipipe::cli
