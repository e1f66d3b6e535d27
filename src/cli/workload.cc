// The workload options `plan` and `simulate` share (workload.h): which global batch (train's
// order for the data flags), and every replica's share of it as train splits it.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/workload.h"
#include "core/error.h"
#include "data/lengths.h"
#include "data/outlier_delay.h"
#include "data/training_batches.h"
#include "plan/replica_balance.h"
#include "sim/rank_order_choice.h"
#include "sim/simulator.h"

namespace infinipipe::cli {

namespace {

struct WorkloadArgs {
  std::string lengths;
  std::string distribution;
  int64_t iteration = 0;
  std::string replica = "0";
};

// What the delay did to batch `iteration` (the line `plan` prints before the plans).
std::string delay_note(int64_t iteration, const data::OutlierDelay::Batch& b, int64_t waiting,
                       int64_t carrying) {
  return fmt::format(
      "outlier delay: batch {} released {} queued outliers, flushed {}, delayed {}; {} wait; {} "
      "of batches 0..{} carried released outliers",
      iteration, b.released, b.flushed, b.delayed, waiting, carrying, iteration);
}

// The data flags (--data-path and the others): train's global batches first .. first + count - 1
// of the training split, read as the trainer reads them (data/training_batches.h: seed, shuffle,
// split, blend, and the outlier delay with its cost when `delay_cm` is given). `note`: with the
// delay, what it did to the last batch.
std::vector<std::vector<int64_t>> dataset_batches(const Config& cfg, int64_t first, int64_t count,
                                                  const cost::CostModel* delay_cm,
                                                  std::string* note) {
  const TrainingConfig& t = cfg.training;
  data::TrainingBatches source(data::data_flags(cfg), t.global_batch_size,
                               static_cast<uint64_t>(t.seed), cfg.model.seq_length);
  if (delay_cm != nullptr)
    source.delay_outliers(cfg.parallel.data_parallel, plan::replica_split_cost_fn(cfg, *delay_cm));
  std::vector<std::vector<int64_t>> out;
  int64_t carrying = 0;
  for (int64_t it = 0; it < first + count; ++it) {
    data::TrainingBatches::Batch b = source.next();
    carrying += b.drawn.released > 0;
    if (it < first) continue;
    if (b.lengths.empty())
      fail_config(
          "global batch {} of the training order has no non-empty document (train would stop "
          "there too): check the data flags, or pick another --iteration",
          it);
    if (note != nullptr && delay_cm != nullptr)
      *note = delay_note(it, b.drawn, source.waiting(), carrying);
    out.push_back(std::move(b.lengths));
  }
  return out;
}

// With --outlier-delay: the batches 0..iteration of the delay over the source's order (as
// `train` draws them: data/outlier_delay.h), the last one's lengths and what the delay did.
std::pair<std::vector<int64_t>, std::string> delayed_batch(const WorkloadArgs& a, const Config& cfg,
                                                           const cost::CostModel& cm,
                                                           std::vector<int64_t> all) {
  const int64_t gbs = cfg.training.global_batch_size;
  const int64_t seq = cfg.model.seq_length;
  const bool synthetic = !a.distribution.empty();
  auto pos = std::make_shared<int64_t>(0);
  auto lengths = std::make_shared<std::vector<int64_t>>(std::move(all));
  // A synthetic stream has no end (no epoch); it is drawn again, longer, when the delay needs
  // more of it (the same seed gives the same prefix). Files and datasets repeat by epoch.
  const data::OutlierDelay::Source source = [&a, &cfg, synthetic, seq, pos, lengths] {
    const int64_t i = (*pos)++;
    if (synthetic && i >= static_cast<int64_t>(lengths->size()))
      *lengths = data::lengths_synthetic(a.distribution, 2 * (i + 1), seq,
                                         static_cast<uint64_t>(cfg.training.seed));
    const int64_t n = static_cast<int64_t>(lengths->size());
    const int64_t k = synthetic ? i : i % n;
    return data::DelayedDocument{
        {0, k}, std::min((*lengths)[static_cast<size_t>(k)], seq), synthetic ? 0 : i / n};
  };
  data::OutlierDelay delay(gbs, cfg.parallel.data_parallel, plan::replica_split_cost_fn(cfg, cm));
  data::OutlierDelay::Batch b;
  int64_t carrying = 0;
  for (int64_t it = 0; it <= a.iteration; ++it) {
    b = delay.next(source);
    carrying += b.released > 0;
  }
  std::vector<int64_t> batch;
  for (const data::DelayedDocument& d : b.documents) batch.push_back(d.length);
  return {batch, delay_note(a.iteration, b, static_cast<int64_t>(delay.queue().size()), carrying)};
}

// Exactly one workload, and --iteration >= 0.
void workload_check(const WorkloadArgs& a, const Config& cfg) {
  const int sources = cfg.training.has_data() + !a.lengths.empty() + !a.distribution.empty();
  if (sources != 1)
    fail_config(
        "give exactly one workload: --lengths FILE, --data-path PREFIX (or --train-data-path) or "
        "--distribution github|commoncrawl|uniform|fixed (got {})",
        sources);
  if (a.iteration < 0) fail_config("--iteration must be >= 0, got {}", a.iteration);
}

// The lengths of --lengths (in file order) or of --distribution, enough of a synthetic stream
// for `count` batches from --iteration on.
std::vector<int64_t> workload_source(const WorkloadArgs& a, const Config& cfg, int64_t count) {
  const int64_t gbs = cfg.training.global_batch_size;
  std::vector<int64_t> all;
  if (!a.distribution.empty()) {
    // Only the sequences these batches need (the delay draws more when it needs them): the
    // stream is the same whatever the iteration.
    all = data::lengths_synthetic(a.distribution, (a.iteration + count) * gbs, cfg.model.seq_length,
                                  static_cast<uint64_t>(cfg.training.seed));
  } else {
    all = data::lengths_from_text(a.lengths);
  }
  return all;
}

// The global batches `iteration` .. iteration + count - 1: train's for the data flags; else
// batch it is sequences [it*gbs, (it+1)*gbs) of the source, wrapping around its end.
std::vector<std::vector<int64_t>> workload_batches(const WorkloadArgs& a, const Config& cfg,
                                                   int64_t count) {
  workload_check(a, cfg);
  if (cfg.training.has_data()) return dataset_batches(cfg, a.iteration, count, nullptr, nullptr);
  const std::vector<int64_t> all = workload_source(a, cfg, count);
  const int64_t gbs = cfg.training.global_batch_size;
  std::vector<std::vector<int64_t>> batches(static_cast<size_t>(count));
  const size_t n = all.size();
  for (int64_t b = 0; b < count; ++b) {
    std::vector<int64_t>& batch = batches[static_cast<size_t>(b)];
    batch.reserve(gbs);
    for (int64_t i = 0; i < gbs; ++i)
      batch.push_back(std::min(all[static_cast<size_t>(((a.iteration + b) * gbs + i) % n)],
                               cfg.model.seq_length));
  }
  return batches;
}

// The global batch of --iteration; with --outlier-delay, the delay's batch of it and its note.
std::pair<std::vector<int64_t>, std::string> workload_lengths(const WorkloadArgs& a,
                                                              const Config& cfg,
                                                              const cost::CostModel& cm) {
  if (!cfg.parallel.outlier_delay) return {workload_batches(a, cfg, 1).front(), ""};
  workload_check(a, cfg);
  if (cfg.training.has_data()) {
    std::string note;
    std::vector<int64_t> batch = dataset_batches(cfg, a.iteration, 1, &cm, &note).front();
    return {std::move(batch), note};
  }
  return delayed_batch(a, cfg, cm, workload_source(a, cfg, 1));
}

}  // namespace

// Adds --lengths / --distribution / --iteration / --replica to `cmd`; the returned loader gives
// the global batch and every replica's share of it (balanced by cost over dp replicas).
WorkloadLoader add_workload_options(CLI::App* cmd) {
  auto a = std::make_shared<WorkloadArgs>();
  cmd->add_option("--lengths", a->lengths, "text file of sequence lengths, one per line");
  cmd->add_option("--distribution", a->distribution,
                  "synthetic lengths: github | commoncrawl | uniform | fixed (seed: --seed)");
  cmd->add_option("--iteration", a->iteration,
                  "which global batch of the workload (from 0); with --data-path, train's batch of "
                  "that iteration")
      ->capture_default_str();
  cmd->add_option("--replica", a->replica,
                  "data-parallel replica whose share is planned, or 'all' (each replica, then the "
                  "slowest against the mean)")
      ->capture_default_str();
  WorkloadLoader loader;
  loader.batches = [a](const Config& cfg, int64_t count) {
    // The delay's batches depend on dp, which a layout search varies.
    if (cfg.parallel.outlier_delay)
      fail_config(
          "--search-layout samples consecutive batches of the source and --outlier-delay "
          "reorders them by dp, which the search varies: drop one of them");
    return workload_batches(*a, cfg, count);
  };
  loader.replica = [a](const Config& cfg) -> int64_t {
    if (a->replica == "all") return -1;
    const int64_t dp = cfg.parallel.data_parallel;
    int64_t replica = 0;
    size_t used = 0;
    try {
      replica = std::stoll(a->replica, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != a->replica.size())
      fail_config("--replica takes a replica index or 'all', got '{}'", a->replica);
    if (replica < 0 || replica >= dp)
      fail_config("--replica {} is outside the {} data-parallel replicas", replica, dp);
    return replica;
  };
  loader.share = [a, replica = loader.replica](const Config& cfg, const cost::CostModel& cm) {
    Workload w;
    const int64_t dp = cfg.parallel.data_parallel;
    w.replica = replica(cfg);
    std::tie(w.global, w.delay_note) = workload_lengths(*a, cfg, cm);
    w.shares = dp == 1 ? std::vector<std::vector<int64_t>>{w.global}
                       : plan::balance_replicas(w.global, dp, cm, cfg);
    return w;
  };
  return loader;
}

// Plans and simulates every replica's share with `schedule`; prints one line per replica and the
// slowest against the mean. Returns the plans (replica order).
std::vector<plan::PlanResult> plan_every_replica(const Config& cfg, const cost::CostModel& cm,
                                                 const Workload& w, Schedule schedule,
                                                 int32_t threads) {
  std::vector<plan::PlanResult> out;
  std::vector<double> steps;
  for (size_t r = 0; r < w.shares.size(); ++r) {
    const cost::CostModel mine = sim::replica_cost_model(cm, cfg, static_cast<int64_t>(r));
    const auto t0 = std::chrono::steady_clock::now();
    out.push_back(plan::make_plan_detailed(cfg, mine, w.shares[r], schedule, threads));
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const sim::StepResult s = sim::simulate(out.back().plan, mine, cfg);
    int64_t tokens = 0, longest = 0;
    for (int64_t l : w.shares[r]) {
      tokens += l;
      longest = std::max(longest, l);
    }
    fmt::print(
        "replica {}: {} sequences, {} tokens (longest {}), predicted step {:.3f} s, planned in "
        "{:.3f} s\n",
        r, w.shares[r].size(), tokens, longest, s.step_time, secs);
    steps.push_back(s.step_time);
  }
  fmt::print("{}\n", plan::replica_imbalance_line(plan::replica_imbalance(steps)));
  return out;
}

}  // namespace infinipipe::cli
