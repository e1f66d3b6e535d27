#include "runtime/train.h"

#include <fmt/format.h>

#include "comm/mpi_comm.h"
#include "comm/mpi_groups.h"
#include "core/error.h"
#include "runtime/train_stop.h"

namespace infinipipe::runtime {

std::vector<std::string> train_config_problems(const Config& cfg, int world_size) {
  std::vector<std::string> out;
  const ParallelConfig& p = cfg.parallel;
  if (world_size > 0 && p.pipeline_parallel * p.data_parallel != world_size) {
    out.push_back(fmt::format(
        "pipeline-model-parallel-size × data-parallel-size must equal the number of processes: "
        "pp = {} × dp = {} = {}, but {} running; {}",
        p.pipeline_parallel, p.data_parallel, p.pipeline_parallel * p.data_parallel,
        world_size == 1 ? "one process is" : fmt::format("{} processes are", world_size),
        world_size == 1 ? "run it as `mpirun -np N infinipipe train ...` with N = pp × dp"
                        : "change the degrees or the -np of mpirun"));
  }
  if (p.ulysses_degree > 1) {
    out.push_back(fmt::format(
        "infinipipe train does not run Ulysses sequence parallelism (ulysses = {}); drop "
        "--ulysses-degree (the planner and simulator study it)",
        p.ulysses_degree));
  }
  if (p.zero_stage != 1) {
    out.push_back(fmt::format(
        "infinipipe train keeps a stage's weights and gradients whole (zero-stage = {}); drop "
        "--zero-stage (ZeRO-3 inside a stage is for `plan` and `simulate`)",
        p.zero_stage));
  }
  if (cfg.training.bf16) {
    out.push_back(
        "--bf16 plans bf16 activations for GPU presets, but CPU training runs in fp32; "
        "drop --bf16 for `infinipipe train`");
  }
  if (!engine_unsupported(cfg.model).empty()) out.push_back(engine_unsupported_message(cfg.model));
  return out;
}

std::vector<std::string> train_run_problems(const Config& cfg, int world_size) {
  std::vector<std::string> out = train_config_problems(cfg, world_size);
  if (cfg.training.train_iters > 0 && !cfg.training.has_data()) {
    out.push_back(fmt::format(
        "train needs a dataset: pass --data-path PREFIX (a Megatron PREFIX.bin/.idx, or a blend "
        "'0.3 A 0.7 B'). Make one with `infinipipe data synth --output PREFIX --seq-length {}` "
        "(synthetic, learnable) or "
        "`infinipipe data prepare --input FILE.jsonl --output PREFIX`",
        cfg.model.seq_length));
  }
  return out;
}

void train_check_config(const Config& cfg, int world_size) {
  const std::vector<std::string> problems = train_run_problems(cfg, world_size);
  if (!problems.empty()) throw ConfigError(problems.front());
}

Trainer::Trainer(const TrainOptions& opts) : backend_(opts.config, opts), driver_(opts, backend_) {}

std::vector<obs::IterationMetrics> train_run(const TrainOptions& options) {
  TrainOptions opts = options;
  static_cast<RunOptions&>(opts) =
      run_options_prepare(options, options.groups ? options.groups->comm().rank() : 0);
  RunStop stop(opts.config.training);  // from here on a signal asks for a stop after the iteration
  Trainer trainer(opts);
  return trainer.driver().run(stop);
}

}  // namespace infinipipe::runtime
