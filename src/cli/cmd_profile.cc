// `infinipipe profile`: times the CPU engine's kernels for the configured model on this machine,
// fits the cost model to them, prints the fit's residuals and the error on held-out points, and
// writes the calibration file that plan, simulate and train read with --calibration.
// Under mpirun with >= 2 ranks it also measures point-to-point and all-reduce, and across hosts
// the links between every pair of hosts, which the file keeps for plan and simulate.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/output_file.h"
#include "cost/calibration.h"
#include "cost/cost_model.h"
#include "options/options.h"
#include "profile/profile.h"
#include "profile/profile_link.h"

namespace infinipipe::cli {
namespace {

struct ProfileOptions {
  std::string out = "calibration.json";
  bool quick = false;
  int64_t repeats = 0;  // 0 = the grid's default
  int64_t threads = 0;  // 0 = OpenMP's default
};

std::string shape_label(const profile::ProfileSample& s) {
  if (s.chunk.size() == 1)
    return fmt::format("{}L len {} ctx {}", s.num_layers, s.chunk[0].len, s.chunk[0].context);
  return fmt::format("{}L {} x {} packed", s.num_layers, s.chunk.size(), s.chunk[0].len);
}

void print_residuals(const profile::ProfileReport& rep) {
  const cost::Calibration& cal = rep.calibration;
  const cost::CostModel cm(cal.model, cal.device, cal.coeffs, 1, false);
  fmt::print("\n{:<26} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10}  {}\n", "chunk (middle stage)",
             "set", "fwd ms", "pred ms", "fwd err", "bwd ms", "bwd err", "");
  for (const profile::ProfileSample& s : rep.samples) {
    const cost::StageShape st{s.num_layers, false, false};
    const double pf = cm.forward_time(s.chunk, st), pb = cm.backward_time(s.chunk, st);
    fmt::print("{:<26} {:>9} {:>10.3f} {:>10.3f} {:>+9.1f}% {:>10.3f} {:>+9.1f}%\n", shape_label(s),
               s.held_out ? "held-out" : "fit", s.forward_s * 1e3, pf * 1e3,
               (pf - s.forward_s) / s.forward_s * 100, s.backward_s * 1e3,
               (pb - s.backward_s) / s.backward_s * 100);
  }
}

void run_profile(const Config& cfg, const ProfileOptions& o) {
  if (o.repeats < 0)
    fail_config("--repeats must be >= 1 (or 0 for the default), got {}", o.repeats);
  if (cfg.parallel.ulysses_degree != 1 || cfg.training.bf16)
    fail_config(
        "profile times the fp32 CPU engine without Ulysses: drop --bf16 and --ulysses-degree "
        "(calibrations for GPU presets come from the presets)");
  // Fail before minutes of timing, not after.
  output_path_check(o.out, "--out");
  // Every rank takes part in the link measurement; then only rank 0 times kernels, so the
  // others do not compete with it for the cores.
  const profile::LinkProfile links =
      profile::profile_links(o.quick ? (1 << 20) : (16 << 20), o.quick ? 3 : 10);
  if (links.rank != 0) return;
  if (links.measured) {
    fmt::print("links ({}):\n", links.note);
    for (const profile::LinkSample& s : links.samples)
      fmt::print("  {:<9} {:>10} bytes  {:>9.1f} us  {:>7.2f} GB/s\n", s.kind, s.bytes,
                 s.seconds * 1e6, static_cast<double>(s.bytes) / s.seconds / 1e9);
    if (links.bandwidth > 0)
      fmt::print("  p2p fit: {:.2f} GB/s, latency {:.1f} us\n", links.bandwidth / 1e9,
                 links.latency_s * 1e6);
    if (links.bandwidth > 0 || !links.host_links.empty())
      fmt::print("  ring all-reduce predicted with {}: error median {:.1f}%, max {:.1f}%\n",
                 links.host_links.empty() ? "the fit" : "the links between hosts",
                 links.allreduce_median_error * 100, links.allreduce_max_error * 100);
  } else {
    fmt::print("links: {}\n", links.note);
  }
  // What plan and simulate price each transfer by (docs/cost-model.md, "Links between hosts").
  fmt::print("links between hosts: {}{}\n", links.host_links_note,
             links.host_links.empty() ? "" : "; the calibration file keeps them (host_links):");
  for (const std::string& line : links.host_links.describe()) fmt::print("  link {}\n", line);
  std::fflush(stdout);

  profile::ProfileGrid grid = profile::profile_grid_default(o.quick);
  if (o.repeats > 0) grid.repeats = o.repeats;
  grid.threads = o.threads;
  fmt::print("timing the engine: hidden {}, ffn {}, heads {}/{}, vocab {}; {} repeats{}\n",
             cfg.model.hidden_size, cfg.model.ffn_size(), cfg.model.num_attention_heads,
             cfg.model.kv_heads(), cfg.model.vocab_size, grid.repeats, o.quick ? " (quick)" : "");
  profile::ProfileReport rep = profile::profile_run(cfg, grid, [](const std::string& line) {
    fmt::print("{}\n", line);
    std::fflush(stdout);
  });
  profile::apply_link_profile(links, rep.calibration.coeffs);
  rep.calibration.host_links = links.host_links;
  rep.calibration.device.sources = fmt::format(
      "measured by infinipipe profile on {} at {}: time coefficients fitted to the engine, sgemm "
      "{:.1f} GFLOP/s on {} thread(s) (sgemm_flops); links: {}; other device fields, peak_flops "
      "included, from the '{}' preset",
      rep.calibration.machine, rep.calibration.date, rep.calibration.device.sgemm_flops / 1e9,
      rep.threads, links.note, cfg.cluster.device);
  const auto send_recv = [&](bool inter_node) {
    return rep.calibration.coeffs.collectives.row(cost::Collective::send_recv, inter_node);
  };
  if (links.measured && links.bandwidth > 0) {
    rep.calibration.device.intra_node_bandwidth = send_recv(false).bus_bandwidth;
    rep.calibration.device.latency_s = send_recv(false).call_latency_s;
  }
  if (!links.host_links.empty())
    rep.calibration.device.inter_node_bandwidth = send_recv(true).bus_bandwidth;
  print_residuals(rep);

  const cost::Coefficients& c = rep.calibration.coeffs;
  fmt::print(
      "\nfit ({} samples): alpha1 {:.4g} s/token^2, alpha2 {:.4g} s/token, beta1 {:.4g} s, "
      "t_half {:.4g} tokens, backward x{:.3f}, recompute x{:.3f}\n",
      rep.fit.num_samples, c.alpha1, c.alpha2, c.beta1, c.half_efficiency_tokens, c.backward_factor,
      c.recompute_factor);
  fmt::print("  embedding {:.4g} s/token, LM head + loss {:.4g} s/token (backward x{:.3f}{})\n",
             c.embedding_per_token, c.lm_head_per_token, c.lm_head_backward_factor,
             c.lm_head_backward_factor < 0.05
                 ? ": the engine's fused loss computes the head's gradient in forward"
                 : "");
  fmt::print("  fit residual (RMS relative): forward {:.1f}%, backward {:.1f}%\n",
             rep.calibration.fit_residual_forward * 100,
             rep.calibration.fit_residual_backward * 100);
  fmt::print(
      "held-out error ({} points not used in the fit): forward median {:.1f}% max {:.1f}%, "
      "backward median {:.1f}% max {:.1f}%, recompute median {:.1f}% max {:.1f}%\n",
      rep.heldout_forward.count, rep.heldout_forward.median * 100, rep.heldout_forward.max * 100,
      rep.heldout_backward.median * 100, rep.heldout_backward.max * 100,
      rep.heldout_recompute.median * 100, rep.heldout_recompute.max * 100);
  fmt::print(
      "memory (from the engine's allocator): {:.0f} B/token/layer kept, {:.0f} recomputed, {:.0f} "
      "K/V, backward working set {:.0f} B/token + {:.0f} B attention tiles\n",
      c.act_bytes_per_token_layer, c.recompute_bytes_per_token_layer, c.kv_bytes_per_token_layer,
      c.grad_bytes_per_token, c.attn_workspace_bytes);
  for (const std::string& note : rep.notes) fmt::print("note: {}\n", note);
  if (rep.interrupted_timings > 0)
    fmt::print(stderr,
               "infinipipe: warning: {} of {} timings were descheduled for other processes in "
               "every one of their runs on {} threads, so they include other processes' time "
               "and the calibration may be off; profile on an idle machine, or with --threads 1 "
               "(then a descheduled run is timed by its thread's CPU time)\n",
               rep.interrupted_timings, rep.timings, rep.threads);
  cost::save_calibration(rep.calibration, o.out);
  fmt::print("wrote {} ({:.0f} s); use it with --calibration {}\n", o.out, rep.seconds, o.out);
}

}  // namespace

void add_profile_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "profile", "time the engine's kernels on this machine and write a calibration file");
  auto opts = std::make_shared<ProfileOptions>();
  cmd->add_option("--out", opts->out, "calibration JSON file to write")->capture_default_str();
  cmd->add_flag("--quick", opts->quick, "a small grid that runs in seconds (a smoke test)");
  cmd->add_option("--repeats", opts->repeats,
                  "timed runs per grid point (the fastest is kept); 0 = default");
  cmd->add_option("--threads", opts->threads,
                  "OpenMP threads while timing (0 = OMP_NUM_THREADS or all cores); time with "
                  "the threads training will use");
  auto config = options::add_config_options(cmd);
  cmd->callback([opts, config] { run_profile(options::resolve_config(*config), *opts); });
}

}  // namespace infinipipe::cli
