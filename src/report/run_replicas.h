// Data-parallel replicas of a traced run: per iteration, the slowest replica's step against the
// replicas' mean, predicted (each replica's plan) and measured (its actions' span). The global
// step waits for the slowest replica, so a ratio above 1 is time every other replica idles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/replica_balance.h"
#include "report/run_compare.h"

namespace infinipipe::report {

struct ReplicaBalance {
  int64_t iteration = 0;
  plan::ReplicaImbalance predicted, measured;
};

// Every iteration the run traced on all dp replicas, in order; empty with one replica.
std::vector<ReplicaBalance> run_replica_balance(const RunCompare& c);
// Markdown: iteration, predicted and measured slowest / mean / ratio, then the means of the
// ratios; "" when empty.
std::string run_replica_balance_table(const std::vector<ReplicaBalance>& rows);
// [{"iteration", "predicted": {...}, "measured": {...}}], each side {"slowest_s", "mean_s",
// "slowest_over_mean", "slowest_replica"} (docs/tracing.md).
nlohmann::json run_replica_balance_json(const std::vector<ReplicaBalance>& rows);

}  // namespace infinipipe::report
