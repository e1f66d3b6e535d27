// `--rank-placement` in `plan` and `simulate`: with measured host links (a calibration file
// `profile` wrote across hosts) it decides which links each replica's pipeline crosses, and
// `auto` plans the batch in both orders and keeps the faster (sim/rank_order_choice.h); without
// them it changes nothing (options/option_usage.cc says so). The order is decided by
// setup/rank_order.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"

namespace infinipipe::setup {

// The configuration to plan the replicas' `shares` of one batch with: `auto` resolved by
// decide_rank_order, on host links by predicted time (its reason printed as "rank placement
// auto: ..."), without them by bytes on one host: Megatron's order, silently.
Config plan_rank_placement(const Config& cfg, const cost::CostModel& cm,
                           const std::vector<std::vector<int64_t>>& shares, Schedule schedule,
                           int32_t threads = 1);

// With host links, replica `replica`'s pipeline hops: "links (Megatron's order, replica 0):
// stage 0 -> 1 host-a -> host-b 58.5 MB/s, 52 us; ..."; "" without.
std::string replica_links_line(const Config& cfg, const cost::CostModel& cm, int64_t replica);

// `report` replays a trained run: the calibration's host links when they can price it (the run's
// rank order named, or pp or dp 1 where the orders are one, which `cfg` then names; its ranks
// within the measured hosts), else `cm` without them and, in `note`, why.
cost::CostModel run_host_links(Config& cfg, const cost::CostModel& cm, std::string& note);

}  // namespace infinipipe::setup
