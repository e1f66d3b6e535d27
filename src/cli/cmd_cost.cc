// `infinipipe cost`: what the cost model predicts for the resolved configuration — the device,
// the coefficients, and time and memory of chunks on a middle pipeline stage. With
// --write-calibration it saves the preset's coefficients as a calibration file (a template for
// hand edits, and what `--calibration` reads back).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "cost/calibration.h"
#include "cost/cost_model.h"
#include "cost/host_link_table.h"
#include "options/options.h"
#include "plan/model_states.h"
#include "plan/planner.h"
#include "plan/schedule_memory.h"
#include "profile/profile.h"

namespace infinipipe::cli {
namespace {

struct CostOptions {
  std::vector<int64_t> tokens = {256, 1024, 4096, 16384};
  int64_t context = 0;
  std::string write_calibration;
};

void run_cost(const Config& cfg, const CostOptions& o) {
  const cost::CostModel cm = profile::planning_cost_model(cfg);
  const cost::DeviceSpec& d = cm.device();
  const cost::Coefficients& c = cm.coefficients();
  fmt::print("device {} ({}): peak {:.3g} FLOP/s, memory {}, intra {:.3g} B/s, inter {:.3g} B/s\n",
             d.name, cfg.cluster.calibration.empty() ? "preset" : cfg.cluster.calibration,
             d.peak_flops, format_bytes(d.memory_bytes), d.intra_node_bandwidth,
             d.inter_node_bandwidth);
  if (d.sgemm_flops > 0)
    fmt::print("sgemm measured {:.3g} FLOP/s by infinipipe profile (threads: see sources)\n",
               d.sgemm_flops);
  fmt::print("sources: {}\n", d.sources);
  const cost::CollectiveCost &inside = c.collectives.row(cost::Collective::send_recv, false),
                             &across = c.collectives.row(cost::Collective::send_recv, true);
  fmt::print(
      "links: intra-node {:.3g} B/s, {:.3g} s; inter-node {:.3g} B/s, {:.3g} s (send/recv, per "
      "device, one direction; {} devices per node)\n",
      inside.bus_bandwidth, inside.call_latency_s, across.bus_bandwidth, across.call_latency_s,
      cfg.cluster.devices_per_node);
  fmt::print(
      "collectives: a call's latency + ring steps x step latency + bytes / bus bandwidth (per "
      "device; inter-node: one device's share of its node's NICs)\n");
  for (const bool inter : {false, true})
    for (int k = 0; k < cost::kCollectives; ++k) {
      const auto op = static_cast<cost::Collective>(k);
      const cost::CollectiveCost& r = c.collectives.row(op, inter);
      fmt::print("  {} {}: {:.3g} s + {:.3g} s/step, {:.3g} B/s\n", inter ? "inter" : "intra",
                 cost::collective_name(op), r.call_latency_s, r.step_latency_s, r.bus_bandwidth);
    }
  fmt::print("  overlapping compute, both {:.4g}x slower ({})\n", c.collectives.overlap_slowdown,
             c.collectives.overlap_source);
  fmt::print("link sources: {}\n",
             d.link_sources.empty() ? "the calibration file" : d.link_sources);
  if (!cm.host_links().empty()) {
    // plan and simulate price each transfer by these (docs/cost-model.md, "Links between hosts").
    const cost::HostLinkTable& t = cm.host_links();
    std::string hosts;
    for (const cost::ClusterHost& h : t.hosts)
      hosts += fmt::format("{}{} ({} slot{})", hosts.empty() ? "" : ", ", h.name, h.slots,
                           h.slots == 1 ? "" : "s");
    fmt::print("measured hosts: {}{}\n", hosts,
               t.host_of_rank.empty() ? "" : "; the measured job's placement of its ranks kept");
    for (const std::string& line : t.describe()) fmt::print("  link {}\n", line);
  }
  fmt::print(
      "alpha1 {:.4g} s/token^2/layer, alpha2 {:.4g} s/token/layer, beta1 {:.4g} s, t_half {:.4g} "
      "tokens, backward x{:.3g}\n",
      c.alpha1, c.alpha2, c.beta1, c.half_efficiency_tokens, c.backward_factor);

  const int64_t pp = cfg.parallel.pipeline_parallel * cfg.parallel.virtual_stages;
  const cost::StageShape stage{.num_layers = cfg.model.num_layers / pp};
  fmt::print("\none middle stage: {} layers, ulysses degree {}, context {}\n", stage.num_layers,
             cm.ulysses_degree(), o.context);
  fmt::print("{:>8} {:>11} {:>11} {:>13} {:>8} {:>12} {:>12}\n", "tokens", "forward", "backward",
             "recompute-all", "of peak", "act (keep)", "act (recomp)");
  for (int64_t t : o.tokens) {
    if (t <= 0) fail_config("--chunk-tokens must be positive, got {}", t);
    const std::vector<cost::SliceShape> chunk = {{o.context, t}};
    const double f = cm.forward_time(chunk, stage);
    const double share =
        cm.flops(chunk, stage.num_layers, false) / cm.ulysses_degree() / f / d.peak_flops;
    fmt::print("{:>8} {:>9.3f}ms {:>9.3f}ms {:>11.3f}ms {:>7.1f}% {:>12} {:>12}\n", t, f * 1e3,
               cm.backward_time(chunk, stage) * 1e3,
               cm.recompute_time(chunk, stage.num_layers) * 1e3, 100 * share,
               format_bytes(cm.activation_bytes(chunk, stage, 0)),
               format_bytes(cm.activation_bytes(chunk, stage, stage.num_layers)));
  }
  // As plans count it: optimizer state sharded over the Ulysses group, and over the dp
  // replicas with --use-distributed-optimizer; with --zero-stage 3 everything over ulysses × dp.
  const plan::MemoryContext mem = plan::plan_memory_context(cfg, plan::planner_budget(cfg, cm));
  const bool sharded = plan::plan_zero_shard(cfg);
  const int64_t dp = plan::plan_optimizer_dp(cfg);
  const std::string how =
      mem.zero_stage == 3
          ? fmt::format(
                "ZeRO-3: weights, gradients and optimizer sharded over {} rank(s), plus "
                "{} of gathered layers",
                mem.zero3_group, format_bytes(plan::stage_gather_buffer_bytes(cm, stage, mem)))
      : sharded ? fmt::format(
                      "optimizer state sharded over {} rank(s): Ulysses group of {} "
                      "× {} data-parallel replica(s)",
                      cm.ulysses_degree() * dp, cm.ulysses_degree(), dp)
                : std::string("no sharding");
  fmt::print("static (weights, grads, optimizer) on this stage: {} ({})\n",
             format_bytes(plan::stage_static_bytes(cm, stage, mem)), how);

  if (!o.write_calibration.empty()) {
    cost::Calibration cal;
    cal.machine = "preset " + d.name;
    cal.date = profile::utc_now();
    cal.notes = "derived from the device preset, not measured (infinipipe cost)";
    cal.model = cfg.model;
    cal.ulysses_degree = cm.ulysses_degree();
    cal.bf16 = cm.bf16();
    cal.device = d;
    cal.coeffs = c;
    cal.host_links = cm.host_links();
    cost::save_calibration(cal, o.write_calibration);
    fmt::print("wrote {}\n", o.write_calibration);
  }
}

}  // namespace

void add_cost_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "cost", "print the cost model's device, coefficients and chunk predictions for a config");
  auto opts = std::make_shared<CostOptions>();
  cmd->add_option("--chunk-tokens", opts->tokens, "chunk sizes (tokens) to tabulate")
      ->delimiter(',');
  cmd->add_option("--context", opts->context, "context (earlier tokens) of every chunk");
  cmd->add_option("--write-calibration", opts->write_calibration,
                  "save the coefficients in use as a calibration JSON file");
  auto config = options::add_config_options(cmd);
  cmd->callback([opts, config] {
    if (opts->context < 0) fail_config("--context must be >= 0, got {}", opts->context);
    run_cost(options::resolve_config(*config), *opts);
  });
}

}  // namespace infinipipe::cli
