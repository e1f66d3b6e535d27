// The run around the driver's iterations: where its metrics go, its trace, its reports,
// evaluations and checkpoints, and how it stops.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "ckpt/checkpoint_fs.h"
#include "ckpt/hf_folder.h"
#include "cost/calibration.h"
#include "obs/tensorboard.h"
#include "obs/trace.h"
#include "plan/schedule_table.h"
#include "runlog/metrics_record.h"
#include "runtime/run_driver.h"
#include "runtime/train_log_rewind.h"

namespace infinipipe::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// The trace writer of a `train --trace` process (null without --trace). Distributed, the ranks
// meet in a barrier first so their clocks start together.
std::unique_ptr<obs::TraceWriter> trace_writer_open(const RunOptions& opts, const RunRank& rank,
                                                    const RunCollectives& collectives) {
  if (opts.trace_dir.empty()) return nullptr;
  obs::TraceProcess who;
  who.pp = static_cast<int32_t>(opts.config.parallel.pipeline_parallel);
  who.dp = static_cast<int32_t>(opts.config.parallel.data_parallel);
  if (rank.distributed) {
    who.world_rank = rank.world_rank;
    who.stage = rank.stage;
    who.replica = rank.replica;
    who.one_process = false;
    if (collectives.barrier) collectives.barrier("starting the trace clock");
  }
  return std::make_unique<obs::TraceWriter>(
      opts.trace_dir, who, opts.config_yaml, plan::schedule_name(opts.config.parallel.schedule),
      obs::TraceClock::now(), opts.trace_iterations, opts.config.cluster.calibration);
}

// The TensorBoard writer of a `train --tensorboard-dir` run: world rank 0 only, where the global
// loss and every other scalar are known (null otherwise).
std::unique_ptr<obs::TensorBoardWriter> tensorboard_writer_open(const RunOptions& opts,
                                                                const RunRank& rank) {
  if (opts.tensorboard_dir.empty() || rank.world_rank != 0) return nullptr;
  return std::make_unique<obs::TensorBoardWriter>(opts.tensorboard_dir);
}

// Megatron's evaluation points: the validation split every --eval-interval iterations and after
// the last one (unless it just ran), then the test split once; they land on that iteration's
// record. The final validation continues the validation order where the last one stopped.
void evaluations_run(RunDriver& driver, const TrainingConfig& tc, obs::IterationMetrics& m) {
  const bool last = m.iteration == tc.train_iters;
  const bool due = m.iteration % tc.eval_interval == 0;
  if (driver.evaluates(data::DataSplit::valid) && (due || last)) {
    const RunDriver::EvalResult r =
        driver.evaluate(data::DataSplit::valid, m.iteration / tc.eval_interval - (due ? 1 : 0));
    m.valid_loss = r.loss;
    m.valid_tokens = r.tokens;
    m.eval_seconds += r.seconds;
  }
  if (last && driver.evaluates(data::DataSplit::test)) {
    const RunDriver::EvalResult r = driver.evaluate(data::DataSplit::test, 0);
    m.test_loss = r.loss;
    m.test_tokens = r.tokens;
    m.eval_seconds += r.seconds;
  }
}

// The one line an early stop ends with, from the first rank even when --quiet: why, and where
// the work is (or that nothing was saved without --save).
void stop_report(const RunOptions& opts, int world_rank, const StopReasons& why,
                 int64_t iteration) {
  if (opts.out == nullptr || world_rank != 0) return;
  const TrainingConfig& tc = opts.config.training;
  const std::string reason = stop_reasons_text(why, tc);
  if (tc.save.empty()) {
    fmt::print(opts.out,
               "stopped at iteration {} of {} ({}): nothing saved, --save was not given\n",
               iteration, tc.train_iters, reason);
  } else {
    fmt::print(opts.out,
               "stopped at iteration {} of {} ({}): checkpoint {} saved; continue with "
               "--load {}\n",
               iteration, tc.train_iters, reason, checkpoint_iter_dir(tc.save, iteration), tc.save);
  }
  std::fflush(opts.out);
}

}  // namespace

std::string train_metrics_path(const std::string& metrics_file, const std::string& log_dir,
                               const std::string& trace_dir, const std::string& save_dir) {
  if (!metrics_file.empty()) return metrics_file;
  for (const std::string& dir : {log_dir, trace_dir, save_dir}) {
    if (!dir.empty()) return (std::filesystem::path(dir) / "metrics.jsonl").string();
  }
  return "";
}

std::string train_rank_path(const std::string& path, int rank) {
  if (path.empty() || rank == 0) return path;
  const std::filesystem::path p(path);
  return (p.parent_path() /
          fmt::format("{}-rank{:05d}{}", p.stem().string(), rank, p.extension().string()))
      .string();
}

// --cost-model-update online: what the pipeline learned, as calibration.json in the --trace and
// --save directories (world rank 0's pipeline), after every iteration so a stopped run keeps it.
void online_calibration_write(const RunDriver& driver) {
  if (driver.rank().world_rank != 0) return;
  const RunOptions& opts = driver.options();
  const std::optional<cost::Calibration> cal = driver.cost_loop().calibration();
  if (!cal) return;
  for (const std::string& dir : {opts.trace_dir, opts.config.training.save}) {
    if (dir.empty()) continue;
    std::filesystem::create_directories(dir);
    cost::save_calibration(*cal, (std::filesystem::path(dir) / kOnlineCalibrationFile).string());
  }
}

RunOptions run_options_prepare(const RunOptions& options, int rank) {
  RunOptions opts = options;
  const TrainingConfig& tc = opts.config.training;
  // Distributed: rank 0 speaks; the others are quiet and write their own metrics (their
  // stage's measured and predicted memory) next to rank 0's, as metrics-rank00001.jsonl.
  if (rank != 0) {
    opts.quiet = true;
    opts.metrics_path = train_rank_path(opts.metrics_path, rank);
    opts.timings_path = train_rank_path(opts.timings_path, rank);
  }
  // A folder that cannot take a checkpoint fails now, not after the work of the first interval.
  if (!tc.save.empty()) fs_check_writable_dir(tc.save, "--save");
  // Megatron's idiom `--save DIR --load DIR` resumes when DIR has a checkpoint and starts fresh
  // (or from --pretrained-checkpoint) when it has none yet (the first run of a job script).
  const bool fallback = tc.load == tc.save || !tc.pretrained_checkpoint.empty();
  if (!tc.load.empty() && fallback && !checkpoint_find_latest(tc.load) && !hf_folder_is(tc.load)) {
    if (!opts.quiet && opts.out != nullptr) {
      fmt::print(opts.out, "no checkpoint in {} yet: starting from {}\n", tc.load,
                 tc.pretrained_checkpoint.empty() ? "scratch" : tc.pretrained_checkpoint);
    }
    opts.config.training.load.clear();
  }
  return opts;
}

std::vector<obs::IterationMetrics> RunDriver::run(RunStop& stop) {
  const RunOptions& opts = opts_;
  const TrainingConfig& tc = opts.config.training;
  const bool talk = !opts.quiet && opts.out != nullptr;
  std::vector<obs::IterationMetrics> out;
  if (talk && resumed()) {
    fmt::print(opts.out, "resumed from {} at iteration {} ({} samples consumed)\n", tc.load,
               iteration(), consumed_samples());
    if (!cost_loop_.resume_note().empty()) fmt::print(opts.out, "{}\n", cost_loop_.resume_note());
  }
  if (talk && !weights_from().empty()) {
    fmt::print(opts.out, "started from the weights of {} (iteration 0, optimizer fresh)\n",
               weights_from());
  }
  int64_t last_saved = resumed() ? iteration() : -1;
  auto save_now = [&] {
    save();
    last_saved = iteration();
    if (talk) {
      fmt::print(opts.out, "saved checkpoint {}\n", checkpoint_iter_dir(tc.save, iteration()));
      std::fflush(opts.out);
    }
  };
  if (iteration() >= tc.train_iters) {
    if (talk && tc.train_iters > 0) {
      fmt::print(opts.out,
                 "nothing to train: the checkpoint is at iteration {}, --train-iters is "
                 "{}\n",
                 iteration(), tc.train_iters);
    }
    if (!tc.save.empty() && last_saved != iteration()) save_now();
    return out;
  }
  for (const std::string& log : {opts.metrics_path, opts.timings_path})
    train_log_rewind(log, iteration());
  obs::MetricsWriter metrics(opts.metrics_path);
  obs::MetricsWriter timings(opts.timings_path);
  obs::ProgressLine progress(opts.err, iteration(), tc.train_iters, !opts.quiet);
  std::unique_ptr<obs::TraceWriter> trace = trace_writer_open(opts, rank_, collectives_);
  std::unique_ptr<obs::TensorBoardWriter> tensorboard = tensorboard_writer_open(opts, rank_);
  const int64_t log_every = std::max<int64_t>(1, tc.log_interval);
  StopReasons stopped;
  while (iteration() < tc.train_iters) {
    const auto t_step = Clock::now();
    obs::IterationMetrics m = step();
    if (talk && !cost_loop_.length_shift_note().empty())
      fmt::print(opts.out, "{}\n", cost_loop_.length_shift_note());
    evaluations_run(*this, tc, m);
    if (trace) {
      const auto t_end = Clock::now();
      nlohmann::json why;
      if (opts.trace_explain && trace->saves_plan(m.iteration)) why = last_plan_explain();
      trace->iteration_add(m, last_plan(), last_stats(), t_step, t_end,
                           why.is_null() ? nullptr : &why);
    }
    online_calibration_write(*this);
    metrics.write(runlog::metrics_record_to_json(m));
    if (tensorboard) tensorboard->scalars_add(m.iteration, obs::tensorboard_scalars(m));
    if (!opts.timings_path.empty()) {
      timings.write(obs::action_timings_to_json(m.iteration, m.predicted_step_seconds, last_stats(),
                                                rank_.stage));
    }
    if (talk && (m.iteration % log_every == 0 || m.iteration == tc.train_iters)) {
      progress.clear();
      fmt::print(opts.out, "{}\n", obs::metrics_format_line(m));
      std::fflush(opts.out);
    }
    progress.update(m);
    out.push_back(std::move(m));
    if (!tc.save.empty() && tc.save_interval > 0 && iteration() % tc.save_interval == 0) {
      progress.clear();
      save_now();
    }
    if (iteration() < tc.train_iters) stopped = stop.check(iteration(), collectives_.stop_agree);
    if (stopped.any()) break;
  }
  if (stopped.any()) {
    progress.clear();
  } else {
    progress.finish();
  }
  if (!tc.save.empty() && last_saved != iteration()) save_now();
  if (stopped.any()) stop_report(opts, rank_.world_rank, stopped, iteration());
  return out;
}

}  // namespace infinipipe::runtime
