// Data-parallel replicas that finish together: the price the replica split balances
// (replica_price.h), and how far the slowest replica's predicted step is from the mean (the
// global step waits for the slowest). balance_replicas itself is declared in planner.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "plan/replica_price.h"

namespace infinipipe::plan {

struct ReplicaImbalance {
  double slowest = 0;  // seconds: the largest predicted step of a replica
  double mean = 0;     // seconds: the replicas' mean predicted step
  double ratio = 0;    // slowest / mean (1 = perfectly balanced); 0 when the mean is 0
  int64_t slowest_replica = 0;
};
// Of the replicas' predicted step times (one per replica; Error if empty or negative).
ReplicaImbalance replica_imbalance(std::span<const double> step_times);
// "replicas: slowest 12.300 s (replica 3), mean 10.000 s, slowest/mean 1.230"
std::string replica_imbalance_line(const ReplicaImbalance& r);

}  // namespace infinipipe::plan
