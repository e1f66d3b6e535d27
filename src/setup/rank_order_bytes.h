// `--rank-placement auto` where no link is measured (the rule setup/rank_order.h applies then):
// which ranks form a pipeline and which replicate it, chosen with the hosts in view (InfiniPipe
// §5: the communication-heavy groups inside a host, the cut across hosts where less crosses).
// Given where each world rank runs, it counts the bytes one iteration sends between hosts in
// Megatron's order and with pipelines on adjacent ranks, and takes the order that sends fewer
// (Megatron's on a tie).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/mpi_groups.h"

namespace infinipipe::setup {

struct PlacementChoice {
  RankOrder order = RankOrder::megatron;
  double megatron_cross_bytes = 0;   // per iteration, between hosts
  double pipelines_cross_bytes = 0;  // the same with pipelines on adjacent ranks
  std::string reason;                // one line for the user
};

// host_of_rank: a host index per world rank (pp × dp of them). allreduce_bytes: the gradients
// one rank of a stage all-reduces per iteration; hop_bytes: what one pipeline hop carries per
// iteration (activations forward, their gradients back).
PlacementChoice rank_placement_choose(const std::vector<int64_t>& host_of_rank, int pp, int dp,
                                      double allreduce_bytes, double hop_bytes);

}  // namespace infinipipe::setup
