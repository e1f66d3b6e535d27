// Planning latency of the whole EPP plan (sequence processor + K search + pipeline grouping +
// schedule + adaptive recompute solve + validation) for one global batch of a github-like
// long-tail workload, Llama-7B on A800s (Ulysses 8 inside a stage, 48K maximum length).
// Goal: 512 sequences at pp 8 in at most 1 s on one core.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "common/paper_llama.h"
#include "core/config.h"
#include "cost/cost_model.h"
#include "data/lengths.h"
#include "plan/planner.h"

namespace {

void BM_PlanEpp(benchmark::State& state) {
  const int64_t n = state.range(0), pp = state.range(1);
  const infinipipe::Config cfg = infinipipe::testing::paper_llama(pp, false);
  const auto cm = infinipipe::cost::CostModel::from_config(cfg);
  const auto lengths = infinipipe::data::lengths_synthetic("github", n, cfg.model.seq_length, 1234);
  size_t chunks = 0;
  for (auto _ : state) {
    const auto p = infinipipe::plan::make_plan(cfg, cm, lengths);
    chunks = p.chunks.size();
    benchmark::DoNotOptimize(p.predicted_step_time);
  }
  state.counters["chunks"] = static_cast<double>(chunks);
}

// Memory-bound: Llama-30B at 96K (the paper's largest setting), where slicing, several
// pipelines and adaptive recompute are needed on pp 4, so the recompute solve runs in full.
void BM_PlanEpp30b96k(benchmark::State& state) {
  const int64_t n = state.range(0), pp = state.range(1);
  const infinipipe::Config cfg = infinipipe::testing::paper_llama(pp, true);
  const auto cm = infinipipe::cost::CostModel::from_config(cfg);
  const auto lengths = infinipipe::data::lengths_synthetic("github", n, cfg.model.seq_length, 1234);
  size_t chunks = 0;
  double gap = 0;
  for (auto _ : state) {
    const auto r =
        infinipipe::plan::make_plan_detailed(cfg, cm, lengths, infinipipe::Schedule::epp);
    chunks = r.plan.chunks.size();
    gap = r.knobs.recompute_gap;
    benchmark::DoNotOptimize(r.plan.predicted_step_time);
  }
  state.counters["chunks"] = static_cast<double>(chunks);
  state.counters["gap_pct"] = 100 * gap;
}

BENCHMARK(BM_PlanEpp30b96k)
    ->ArgNames({"seqs", "pp"})
    ->Args({512, 4})
    ->Args({512, 8})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

BENCHMARK(BM_PlanEpp)
    ->ArgNames({"seqs", "pp"})
    ->Args({512, 4})
    ->Args({512, 8})
    ->Args({512, 16})
    ->Args({512, 32})
    ->Args({1024, 8})
    ->Args({2048, 8})
    ->Args({4096, 8})
    ->Args({8192, 8})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
