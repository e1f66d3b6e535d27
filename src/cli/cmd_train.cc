// `infinipipe train`: training of the Llama model on a Megatron dataset, every global batch
// planned by the planner (EPP by default) and run by the executor; in one process, or under
// `mpirun -np N` with N = pp × dp ranks.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_config.h"
#include "ckpt/hf_folder.h"

#include "cli/commands.h"
#include "cli/options.h"
#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "comm/mpi_watchdog.h"
#include "core/error.h"
#include "obs/trace.h"
#include "runtime/train.h"

namespace infinipipe::cli {

namespace {

struct TrainArgs {
  std::shared_ptr<ConfigOptions> config;
  std::string metrics;
  std::string log_dir;
  std::string timings;
  std::string trace;
  std::string trace_iterations;
  bool trace_explain = false;
  bool quiet = false;
};

// The Hugging Face folder the run starts from (--load, else --pretrained-checkpoint), if any.
std::string hf_start_folder(const TrainingConfig& tc) {
  for (const std::string& dir : {tc.load, tc.pretrained_checkpoint}) {
    if (!dir.empty() && !checkpoint_find_latest(dir) && hf_folder_is(dir)) return dir;
  }
  return "";
}

// The run's configuration. Starting from a Hugging Face folder, its config.json defines the
// model: model flags may repeat it but not contradict it.
Config resolve_train_config(const ConfigOptions& options) {
  const Config user = resolve_config(options, Config{}, false);
  const std::string folder = hf_start_folder(user.training);
  if (folder.empty()) return resolve_config(options);
  Config base;
  const ModelConfig defaults = base.model;
  base.model = HfModelReader(folder).model();
  base.model.seq_length = std::min(defaults.seq_length, base.model.max_position_embeddings);
  const Config cfg = resolve_config(options, base);
  const std::vector<std::string> diff = checkpoint_model_diff(base.model, cfg.model);
  if (!diff.empty()) {
    fail_config(
        "{} is a Hugging Face model whose config.json defines the model, and the model flags "
        "contradict it: {}; drop those flags (the folder sets them) or load another folder",
        folder, fmt::join(diff, "; "));
  }
  return cfg;
}

void run_train_rank(const TrainArgs& a, const ProcessGroups* groups, Watchdog* watchdog) {
  runtime::TrainOptions opts;
  opts.config = resolve_train_config(*a.config);
  runtime::train_check_config(opts.config, groups ? groups->layout().world_size() : 1);
  opts.config_yaml = config_to_yaml(opts.config);
  opts.metrics_path = runtime::train_metrics_path(a.metrics, a.log_dir, opts.config.training.save);
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
  if (!a.trace.empty() && a.metrics.empty() && a.log_dir.empty()) {
    opts.metrics_path = runtime::train_metrics_path("", a.trace, "");  // next to the traces
  }
  opts.quiet = a.quiet || (groups && groups->comm().rank() != 0);
  opts.groups = groups;
  opts.watchdog = watchdog;
  if (!opts.quiet) {
    const Config& c = opts.config;
    fmt::print(
        "training {} layers x hidden {} ({} parameters), {} schedule, pp {} x dp {}, {} "
        "iterations of {} sequences up to {} tokens{}\n",
        c.model.num_layers, c.model.hidden_size, c.model.params_total(),
        schedule_name(c.parallel.schedule), c.parallel.pipeline_parallel, c.parallel.data_parallel,
        c.training.train_iters, c.training.global_batch_size, c.model.seq_length,
        opts.metrics_path.empty() ? "" : fmt::format("; metrics -> {}", opts.metrics_path));
    std::fflush(stdout);
  }
  const auto iters = runtime::train_run(opts);
  if (!opts.quiet && !iters.empty()) {
    fmt::print("done: {} iterations, final loss {:.4f}\n", iters.size(), iters.back().loss);
  }
}

void run_train(const TrainArgs& a) {
  if (!mpi_launched()) {
    run_train_rank(a, nullptr, nullptr);
    return;
  }
  // Under mpirun: an error on any rank reaches the terminal once and ends the whole job.
  Comm comm;
  const int rc = comm_run_guarded([&] {
    const Config cfg = resolve_train_config(*a.config);
    ProcessGroups groups(comm, cfg.parallel.pipeline_parallel, cfg.parallel.data_parallel);
    // With the exit signal handler a SIGTERM is a request to stop (runtime/train_stop.h), not
    // the launcher ending the job, so the watchdog leaves it alone.
    Watchdog watchdog(comm.options().watchdog_timeout(), !cfg.training.exit_signal_handler);
    run_train_rank(a, &groups, &watchdog);
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
  args->config = add_config_options(cmd);
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
  cmd->callback([args] { run_train(*args); });
}

}  // namespace infinipipe::cli
