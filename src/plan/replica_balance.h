// Data-parallel replicas that finish together: the cost the replica split balances, and how far
// the slowest replica's predicted step is from the mean (the global step waits for the slowest).
// balance_replicas itself is declared in planner.h.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::plan {

// Predicted forward + backward seconds of one whole sequence of `length` tokens through every
// layer (no recompute): what the outlier delay (data/outlier_delay.h) weighs.
double replica_sequence_cost(const cost::CostModel& cm, int64_t length);
// The same as a function of the length, for data::OutlierDelay (the cost model is copied).
std::function<double(int64_t)> replica_sequence_cost_fn(const cost::CostModel& cm);

// What balance_replicas weighs: replica_sequence_cost plus the recompute the sequence's own
// activations force. A long sequence is sliced and every pipeline rank holds all its slices
// until their backwards, so where that exceeds the rank's budget (less its model states) the
// planner must recompute; the fraction is Eq. 14's estimate for the sequence in its own pipeline
// (pipeline_grouping.cc), (full − cap) / (full − lean), charged at the full recompute time of the
// rank's layers. Without it a replica holding a 1M-token sequence planned 10% above the mean
// (docs/benchmarks.md, "Replica balance").
class ReplicaSplitCost {
 public:
  ReplicaSplitCost(const Config& cfg, const cost::CostModel& cm);
  double operator()(int64_t length) const;
  // The recompute part alone (0 when the sequence's activations fit on every stage).
  double recompute(int64_t length) const;

 private:
  struct Stage {                // one pipeline rank: its stages' layers as one
    cost::StageShape shape;
    double activation_cap = 0;  // bytes: budget less the rank's model states
  };
  cost::CostModel cm_;
  std::vector<Stage> stages_;
};

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
