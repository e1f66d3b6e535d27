#include "setup/plan_rank_order.h"

#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "cost/host_link_table.h"
#include "setup/rank_order.h"
#include "sim/rank_order_choice.h"

namespace infinipipe::setup {

Config plan_rank_placement(const Config& cfg, const cost::CostModel& cm,
                           const std::vector<std::vector<int64_t>>& shares, Schedule schedule,
                           int32_t threads) {
  if (cfg.parallel.rank_placement != RankPlacement::auto_) return cfg;
  RankOrderQuestion question;
  MeasuredOrders measured;
  if (!cm.host_links().empty()) {
    measured.cm = &cm;
    measured.shares = &shares;
    measured.schedule = schedule;
    measured.threads = threads;
    question.measured = &measured;
  }
  const RankOrderDecision d = decide_rank_order(cfg, question);
  // Without links plan and simulate price no host, so they say nothing.
  if (question.measured) {
    fmt::print("rank placement auto: {}\n", d.reason);
    std::fflush(stdout);
  }
  return config_with_rank_order(cfg, d.order);
}

std::string replica_links_line(const Config& cfg, const cost::CostModel& cm, int64_t replica) {
  if (cm.host_links().empty()) return "";
  const cost::HostLinkTable& t = cm.host_links();
  const cost::RankGrid grid = cost::config_rank_grid(cfg);
  const std::vector<int64_t> host = t.host_of_ranks(grid.devices());
  const cost::CostModel mine = sim::replica_cost_model(cm, cfg, replica);
  const auto name = [&](int64_t stage) -> const std::string& {
    return t
        .hosts[static_cast<size_t>(host[static_cast<size_t>(grid.device_of(stage, replica, 0))])]
        .name;
  };
  std::string out = fmt::format(
      "links ({}, replica {}):",
      grid.order == RankOrder::pipelines ? "pipelines on adjacent ranks" : "Megatron's order",
      replica);
  for (int64_t s = 0; s + 1 < grid.pp; ++s) {
    const cost::Link& l =
        mine.pipeline_links().at(static_cast<int32_t>(s), static_cast<int32_t>(s + 1));
    out += fmt::format("{} stage {} -> {} {} -> {} {:.1f} MB/s, {:.0f} us", s ? ";" : "", s, s + 1,
                       name(s), name(s + 1), l.bandwidth / 1e6, l.latency_s * 1e6);
  }
  if (grid.pp == 1) out += " one stage, no pipeline hops";
  return out;
}

cost::CostModel run_host_links(Config& cfg, const cost::CostModel& cm, std::string& note) {
  if (cm.host_links().empty()) return cm;
  // With one stage or one replica both orders place the ranks alike.
  if (cfg.parallel.rank_placement == RankPlacement::auto_ &&
      (cfg.parallel.pipeline_parallel == 1 || cfg.parallel.data_parallel == 1))
    cfg = config_with_rank_order(cfg, RankOrder::megatron);
  std::string why;
  if (cfg.parallel.rank_placement == RankPlacement::auto_) {
    why = "the run chose its rank order itself (--rank-placement auto)";
  } else {
    try {
      cm.host_links().host_of_ranks(cost::config_rank_grid(cfg).devices());
      return cm;
    } catch (const ConfigError& e) {
      why = e.what();
    }
  }
  note = fmt::format(
      "note: the calibration's measured host links are not used here: {}; the two global links "
      "price the data-parallel all-reduce",
      why);
  return cm.with_host_links({});
}

}  // namespace infinipipe::setup
