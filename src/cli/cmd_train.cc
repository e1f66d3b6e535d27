// `infinipipe train`: training of the Llama model on a Megatron dataset, every global batch
// planned by the planner (EPP by default) and run by the executor; in one process, or under
// `mpirun -np N` with N = pp × dp ranks (or a degree `auto`, chosen by a layout search first).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "ckpt/checkpoint.h"

#include "cli/commands.h"
#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "comm/mpi_hosts.h"
#include "comm/mpi_node.h"
#include "comm/mpi_watchdog.h"
#include "core/error.h"
#include "data/run_datasets.h"
#include "obs/trace.h"
#include "options/options.h"
#include "plan/schedule_table.h"
#include "runtime/checkpoint_meta.h"
#include "runtime/train.h"
#include "runtime/train_links.h"
#include "setup/rank_order.h"
#include "setup/train_auto_layout.h"
#include "setup/train_config.h"

namespace infinipipe::cli {

namespace {

struct TrainArgs {
  std::shared_ptr<options::ConfigOptions> config;
  std::string metrics;
  std::string log_dir;
  std::string timings;
  std::string trace;
  std::string trace_iterations;
  bool trace_explain = false;
  bool quiet = false;
  int64_t search_iterations = 4;
  CLI::Option* search_iterations_option = nullptr;
};

void run_train_rank(const TrainArgs& a, const ProcessGroups* groups, Watchdog* watchdog,
                    const cost::HostLinkTable& links = {}) {
  runtime::TrainOptions opts;
  opts.host_links = links;
  opts.config = setup::resolve_train_config(*a.config);
  runtime::train_check_config(opts.config, groups ? groups->layout().world_size() : 1);
  // Recorded with the tokenizer the run resolves (the --load folder's when no flag names one).
  opts.config_yaml = options::config_to_yaml(runtime::config_with_run_tokenizer(opts.config));
  opts.metrics_path =
      runtime::train_metrics_path(a.metrics, a.log_dir, a.trace, opts.config.training.save);
  opts.timings_path = a.timings;
  opts.trace_dir = a.trace;
  if (!a.trace_iterations.empty()) {
    if (a.trace.empty()) {
      throw ConfigError("--trace-iterations chooses what --trace records: add --trace DIR");
    }
    opts.trace_iterations = obs::trace_iterations_parse(a.trace_iterations);
  }
  if (a.trace_explain && a.trace.empty()) {
    throw ConfigError("--trace-explain explains the plans --trace saves: add --trace DIR");
  }
  opts.trace_explain = a.trace_explain;
  opts.tensorboard_dir = opts.config.training.tensorboard_dir;
  opts.quiet = a.quiet || (groups && groups->comm().rank() != 0);
  // Once per run, before it starts, so no token is lost without a word.
  if (!groups || groups->comm().rank() == 0) {
    const std::string said = data::run_samples_message(opts.config);
    if (!said.empty()) fmt::print(stderr, "infinipipe: {}\n", said);
  }
  opts.groups = groups;
  opts.watchdog = watchdog;
  if (!opts.quiet) {
    const Config& c = opts.config;
    fmt::print(
        "training {} layers x hidden {} ({} parameters), {} schedule, pp {} x dp {}, {} "
        "iterations of {} sequences up to {} tokens{}\n",
        c.model.num_layers, c.model.hidden_size, c.model.params_total(),
        plan::schedule_name(c.parallel.schedule), c.parallel.pipeline_parallel,
        c.parallel.data_parallel, c.training.train_iters, c.training.global_batch_size,
        c.model.seq_length,
        opts.metrics_path.empty() ? "" : fmt::format("; metrics -> {}", opts.metrics_path));
    std::fflush(stdout);
  }
  const auto iters = runtime::train_run(opts);
  if (!opts.quiet && !iters.empty()) {
    fmt::print("done: {} iterations, final loss {:.4f}\n", iters.size(), iters.back().loss);
  }
}

// Rank 0 searches an auto layout while the others wait for its answer; the search takes seconds
// on the models CPU trains, so a wait this long means rank 0 died or hung.
constexpr double kLayoutSearchWaitSeconds = 900;

// The run's arguments with auto parallel degrees (and a rank order chosen with measured links)
// resolved; unchanged without.
TrainArgs train_args_resolved(const TrainArgs& a, const Comm* comm,
                              const cost::HostLinkTable& links = {}) {
  setup::TrainAutoLayout how;
  how.links = links;
  how.world = comm ? comm->size() : 1;
  how.searcher = !comm || comm->rank() == 0;
  how.print = how.searcher && !a.quiet;
  how.search_iterations = a.search_iterations;
  how.search_iterations_given = a.search_iterations_option->count() > 0;
  if (comm && comm->size() > 1) {
    how.hosts = [comm] {
      std::vector<cost::RankHost> out;
      for (const NodeRanks& n : node_ranks_all(comm->world(), comm->options().p2p_timeout_s))
        out.push_back({n.node, n.cores, n.ranks});
      return out;
    };
    how.share = [comm](setup::ChosenLayout& layout) {
      MPI_Request request = MPI_REQUEST_NULL;
      mpi_check(MPI_Ibcast(layout.data(), static_cast<int>(layout.size()), MPI_INT64_T, 0,
                           comm->world(), &request),
                "sharing the searched layout");
      MPI_Status status;
      mpi_wait_deadline({&request, 1}, {&status, 1}, kLayoutSearchWaitSeconds,
                        {"the layout rank 0 searched", "rank 0 may have died or hung", {}});
    };
  }
  std::string folder;
  const Config defaults = setup::train_defaults(*a.config, folder);
  TrainArgs out = a;
  out.config = setup::train_resolve_auto_layout(a.config, defaults, how);
  return out;
}

// --measure-links: the links between the hosts, measured on every rank before the groups are
// made (their order may be chosen with them); empty without the option.
cost::HostLinkTable train_links_before_groups(const TrainArgs& a, const Comm& comm) {
  std::string folder;
  const Config lenient =
      options::resolve_config_lenient(*a.config, setup::train_defaults(*a.config, folder));
  if (!lenient.cluster.measure_links) return {};
  return runtime::train_links_measure(comm.world(), comm.options().p2p_timeout_s, comm.rank() == 0);
}

// The run's rank order, decided before its groups are made (setup/rank_order.h) on the hosts
// MPI names; with auto and links measured across hosts the layout search has chosen it already
// and the options name it. Rank 0 prints what auto chose and why.
RankOrder train_rank_order(const Config& cfg, const Comm& comm, bool print) {
  setup::RankOrderQuestion question;
  for (int r = 0; r < comm.size(); ++r) question.rank_hosts.push_back(rank_host(r));
  const setup::RankOrderDecision d = setup::decide_rank_order(cfg, question);
  if (print && d.decided) {
    fmt::print("rank placement auto: {}\n", d.reason);
    std::fflush(stdout);
  }
  return d.order;
}

void run_train(const TrainArgs& given) {
  if (!mpi_launched()) {
    given.config->world_size = 1;
    run_train_rank(train_args_resolved(given, nullptr), nullptr, nullptr);
    return;
  }
  // Under mpirun: an error on any rank reaches the terminal once and ends the whole job.
  Comm comm;
  given.config->world_size = comm.size();
  const int rc = comm_run_guarded([&] {
    const cost::HostLinkTable links = train_links_before_groups(given, comm);
    const TrainArgs a = train_args_resolved(given, &comm, links);
    const Config cfg = setup::resolve_train_config(*a.config);
    ProcessGroups groups(comm, cfg.parallel.pipeline_parallel, cfg.parallel.data_parallel,
                         train_rank_order(cfg, comm, comm.rank() == 0 && !a.quiet));
    // With the exit signal handler a SIGTERM is a request to stop (runtime/train_stop.h), not
    // the launcher ending the job, so the watchdog leaves it alone.
    Watchdog watchdog(comm.options().watchdog_timeout(), !cfg.training.exit_signal_handler);
    run_train_rank(a, &groups, &watchdog, links);
    comm.barrier("the end of training");
    return 0;
  });
  if (rc != 0) throw Error("training failed");
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "train the model: each global batch is planned (EPP by default, --schedule to change) "
      "under --memory-budget and executed, in one process or under `mpirun -np N` with N = "
      "pp x dp; --save/--load checkpoint and resume (any pp/dp layout)");
  args->config = options::add_config_options(cmd);
  setup::train_checks_install(*args->config, true);
  cmd->add_option("--metrics", args->metrics,
                  "JSON-lines file to append per-iteration metrics to (default: "
                  "LOG_DIR/metrics.jsonl, else SAVE/metrics.jsonl)");
  cmd->add_option("--log-dir", args->log_dir, "directory for metrics.jsonl");
  cmd->add_option("--timings", args->timings,
                  "JSON-lines file of every action's measured start/end next to the plan's "
                  "predicted time, one line per iteration");
  cmd->add_option("--trace", args->trace,
                  "directory for per-rank Chrome traces (Perfetto, chrome://tracing), the plans "
                  "and the config of the traced iterations (--trace-iterations): `infinipipe "
                  "report DIR` compares them with the predictions");
  cmd->add_option("--trace-iterations", args->trace_iterations,
                  "the iterations --trace records, FIRST-LAST or N (default: 1-50)");
  cmd->add_flag("--trace-explain", args->trace_explain,
                "save each traced plan with its explanation (as `plan --explain`), which "
                "`infinipipe report DIR` shows");
  cmd->add_flag("--quiet,-q", args->quiet, "no per-iteration lines and no progress line");
  args->search_iterations_option =
      cmd->add_option("--search-iterations", args->search_iterations,
                      "with --pp / --dp / --vpp / --ulysses-degree auto, or --rank-placement "
                      "auto with --measure-links: the run's first training batches the layout "
                      "search samples (at most the iterations it trains; from the checkpoint's "
                      "position with --load)")
          ->capture_default_str();
  cmd->callback([args] { run_train(*args); });
}

}  // namespace infinipipe::cli
