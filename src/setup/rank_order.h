// `--rank-placement`: the one place a run's rank order is decided, for `train` (MPI), the
// PyTorch trainer (torch.distributed), `plan`, `simulate` and train's layout search. Given orders
// are kept; `auto` is decided by predicted time where links between the hosts were measured (a
// batch planned and simulated in both orders, sim/rank_order_choice.h, or the layout search that
// ranked both), else by the bytes each order sends between the ranks' hosts
// (setup/rank_order_bytes.h). The caller supplies where each rank runs as plain host names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "sim/layout_search.h"

namespace infinipipe::setup {

// The orders as predicted on measured host links: one of the two forms.
struct MeasuredOrders {
  // `plan` / `simulate`: every replica's share of one batch (dp of them), planned and simulated
  // in both orders on the links of `cm` (which has host links) with `schedule`.
  const cost::CostModel* cm = nullptr;
  const std::vector<std::vector<int64_t>>* shares = nullptr;
  Schedule schedule = Schedule::epp;
  int32_t threads = 1;
  // `train`: the layout search that ranked both orders on the run's sampled batches, and the
  // measured links it priced them with, as printed ("a <-> b: 117 MB/s, 52 us").
  const sim::LayoutSearchResult* search = nullptr;
  std::string links;
};

struct RankOrderQuestion {
  // The host name of every world rank, by rank (MPI_Get_processor_name, or socket.gethostname()
  // gathered by torch.distributed); empty: every rank on one host.
  std::vector<std::string> rank_hosts;
  // Links between two hosts or more were measured: how the orders were predicted. Null: by bytes.
  const MeasuredOrders* measured = nullptr;
  // The runtime measures links (`infinipipe train --measure-links`); the PyTorch trainer does
  // not, which the reason says where it ranks by bytes.
  bool runtime_measures_links = true;
};

struct RankOrderDecision {
  RankOrder order = RankOrder::megatron;
  bool decided = false;  // --rank-placement auto was resolved here (else the order was given)
  std::string reason;    // one line, printed as "rank placement auto: <reason>" when decided
};

// The order `cfg` (pp and dp resolved, --rank-placement megatron, pipelines or auto) runs in.
RankOrderDecision decide_rank_order(const Config& cfg, const RankOrderQuestion& q);

// cfg with --rank-placement set to `order`.
Config config_with_rank_order(Config cfg, RankOrder order);

}  // namespace infinipipe::setup
