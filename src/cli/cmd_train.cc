// `infinipipe train`: single-process training (pp = dp = 1) of the Llama model on a Megatron
// dataset, every global batch planned by the planner (EPP by default) and run by the executor.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/error.h"
#include "runtime/train.h"

namespace infinipipe::cli {

namespace {

struct TrainArgs {
  std::shared_ptr<ConfigOptions> config;
  std::string metrics;
  std::string log_dir;
  std::string timings;
  bool quiet = false;
};

void run_train(const TrainArgs& a) {
  runtime::TrainOptions opts;
  opts.config = resolve_config(*a.config);
  runtime::train_check_config(opts.config);
  opts.config_yaml = config_to_yaml(opts.config);
  opts.metrics_path = runtime::train_metrics_path(a.metrics, a.log_dir, opts.config.training.save);
  opts.timings_path = a.timings;
  opts.quiet = a.quiet;
  if (!a.quiet) {
    const Config& c = opts.config;
    fmt::print(
        "training {} layers x hidden {} ({} parameters), {} schedule, {} iterations of {} "
        "sequences up to {} tokens{}\n",
        c.model.num_layers, c.model.hidden_size, c.model.params_total(),
        schedule_name(c.parallel.schedule), c.training.train_iters, c.training.global_batch_size,
        c.model.seq_length,
        opts.metrics_path.empty() ? "" : fmt::format("; metrics -> {}", opts.metrics_path));
    std::fflush(stdout);
  }
  const auto iters = runtime::train_run(opts);
  if (!a.quiet && !iters.empty()) {
    fmt::print("done: {} iterations, final loss {:.4f}\n", iters.size(), iters.back().loss);
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "train the model in one process (pp = dp = 1): each global batch is planned (EPP by "
      "default, --schedule to change) under --memory-budget and executed; --save/--load "
      "checkpoint and resume");
  args->config = add_config_options(cmd);
  cmd->add_option("--metrics", args->metrics,
                  "JSON-lines file to append per-iteration metrics to (default: "
                  "LOG_DIR/metrics.jsonl, else SAVE/metrics.jsonl)");
  cmd->add_option("--log-dir", args->log_dir, "directory for metrics.jsonl");
  cmd->add_option("--timings", args->timings,
                  "JSON-lines file of every action's measured start/end next to the plan's "
                  "predicted time, one line per iteration");
  cmd->add_flag("--quiet,-q", args->quiet, "no per-iteration lines and no progress line");
  cmd->callback([args] { run_train(*args); });
}

}  // namespace infinipipe::cli
