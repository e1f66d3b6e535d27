// Planner latency over batch size × pipeline degree (issue 6: 512 … 8192 sequences, pp 4 … 32),
// with the time of each phase of the EPP planner measured on the winning setting: sequence
// processor, pipeline grouping (Eq. 14), schedule, checkpoint problem + greedy solve, exact
// checkpoint solve, validation. Llama-7B, 48K maximum length, GitHub-like lengths, A800 preset,
// Ulysses 8 inside a stage (as bench_planner). One core, one run per point; prints markdown.
// Usage: bench_planner_grid [--quick] [--model=7b48k|30b96k]   (quick: 512, 1024 × pp 4, 8)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/config.h"
#include "cost/cost_model.h"
#include "data/lengths.h"
#include "plan/recompute.h"
#include "plan/planner.h"
#include "plan/schedule.h"
#include "plan/schedule_memory.h"
#include "plan/sequence_processor.h"
#include "plan/validate.h"

using namespace infinipipe;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Llama-7B at 48K (memory does not bind: no recompute) or Llama-30B at 96K (memory binds:
// slicing, several pipelines and the exact checkpoint solve all run), as examples/llama*.yaml.
Config grid_config(int64_t pp, bool big) {
  Config cfg;
  cfg.model.num_layers = big ? 60 : 32;
  cfg.model.hidden_size = big ? 6144 : 4096;
  cfg.model.num_attention_heads = big ? 48 : 32;
  cfg.model.ffn_hidden_size = big ? 16384 : 11008;
  cfg.model.vocab_size = 32000;
  cfg.model.seq_length = big ? 98304 : 49152;
  cfg.training.bf16 = true;
  cfg.cluster.device = "a800-80gb";
  cfg.parallel.pipeline_parallel = pp;
  cfg.parallel.ulysses_degree = 8;
  cfg.cluster.num_devices = pp * 8;
  cfg.cluster.devices_per_node = 8;
  cfg.parallel.schedule = Schedule::epp;
  return cfg;
}

std::string ms(double s) {
  char buf[32];
  if (s >= 1.0)
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  else
    std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  return buf;
}

// Seconds of each phase of the EPP planner, once on the winning setting of a plan.
struct PhaseSeconds {
  double processor = 0, grouping = 0, schedule = 0, greedy = 0, exact = 0, predict = 0,
         validate = 0, pack = 0;
  plan::RecomputeSolution exact_solution;
  bool valid = false;

  // Candidates × the per-candidate phases + the once-only ones; the rest of the whole plan is
  // the K=1 packing, candidates' own bookkeeping and the tuned baselines' shared helpers.
  double attributed(int32_t candidates) const {
    return candidates * (processor + grouping + schedule + greedy + predict) + pack + exact +
           validate;
  }
};

// The phases, once each on the winner's setting (the K search runs the first four per
// candidate, with the greedy recompute solve; the exact solve and validation run once).
PhaseSeconds phases_time(const Config& cfg, const cost::CostModel& cm,
                         const std::vector<int64_t>& lengths, const plan::PlanResult& r) {
  PhaseSeconds t;
  const int32_t ipp = static_cast<int32_t>(cfg.parallel.pipeline_parallel);
  const cost::StageShape ref = plan::processor_reference_stage(cm.model(), ipp);
  auto t0 = Clock::now();
  const plan::ProcessorResult pr = plan::sequence_process(lengths, std::max(1, r.knobs.slices), cm,
                                                          ref, cfg.parallel.min_tail_slice);
  t.processor = since(t0);

  const int64_t budget = plan::planner_budget(cfg, cm);
  const plan::MemoryContext mem = plan::plan_memory_context(cfg, budget);
  const cost::StageShape first = plan::stage_shape(r.plan.stages[0]);
  const int64_t act_budget = budget - plan::stage_static_bytes(cm, first, mem);
  t0 = Clock::now();
  const auto groups = plan::epp_group_pipelines(pr.chunks, ipp, cm, first, act_budget);
  t.grouping = since(t0);

  plan::Plan p = r.plan;
  t0 = Clock::now();
  plan::schedule_build(p, Schedule::epp);
  t.schedule = since(t0);

  t0 = Clock::now();
  const plan::RecomputeProblem pb =
      plan::recompute_problem(p, cm, mem, plan::RecomputeTie::diagonal);
  const plan::RecomputeSolution greedy = plan::recompute_solve_greedy(pb);
  t.greedy = since(t0);
  t0 = Clock::now();
  t.exact_solution = plan::recompute_solve_exact(pb);
  t.exact = since(t0);

  // What every candidate also pays: predicted action times and the memory trace.
  t0 = Clock::now();
  plan::plan_predict(p, cm, cfg);
  const plan::MemoryTrace trace = plan::schedule_memory_trace(p, cm, cfg);
  t.predict = since(t0);

  t0 = Clock::now();
  t.valid = plan::validate(r.plan, cm, cfg).ok();
  t.validate = since(t0);
  t0 = Clock::now();
  const auto packed = plan::pack_micro_batches(
      lengths, *std::max_element(lengths.begin(), lengths.end()));  // the K=1 candidate's chunks
  t.pack = since(t0);
  (void)groups;
  (void)greedy;
  (void)trace;
  (void)packed;
  return t;
}

// How far the exact checkpoint solve is from its lower bound.
std::string exact_gap(const plan::RecomputeSolution& exact) {
  char gap[48];
  if (!exact.feasible)
    std::snprintf(gap, sizeof gap, "infeasible");
  else if (exact.cost <= 0)
    std::snprintf(gap, sizeof gap, "no recompute");
  else
    std::snprintf(gap, sizeof gap, "gap %.1f%%%s",
                  100.0 * (exact.cost - exact.lower_bound) / exact.cost,
                  exact.proven ? "" : ", not proven");
  return gap;
}

void grid_point(int64_t n, int64_t pp, bool big) {
  const Config cfg = grid_config(pp, big);
  const auto cm = cost::CostModel::from_config(cfg);
  const auto lengths = data::lengths_synthetic("github", n, cfg.model.seq_length, 1234);

  const auto t0 = Clock::now();
  plan::PlanResult r;
  try {
    r = plan::make_plan_detailed(cfg, cm, lengths, Schedule::epp);
  } catch (const std::exception& e) {
    std::printf("| %lld | %lld | failed: %s |||||||||||\n", (long long)n, (long long)pp, e.what());
    return;
  }
  const double total = since(t0);
  const PhaseSeconds t = phases_time(cfg, cm, lengths, r);
  std::printf(
      "| %lld | %lld | %s | %d | %zu (K=%d, %d pipeline%s) | %s | %s | %s | %s | %s | %s (%s) | "
      "%s%s | %.0f%% |\n",
      (long long)n, (long long)pp, ms(total).c_str(), r.knobs.candidates, r.plan.chunks.size(),
      r.knobs.slices, r.knobs.pipelines, r.knobs.pipelines > 1 ? "s" : "", ms(t.processor).c_str(),
      ms(t.grouping).c_str(), ms(t.schedule).c_str(), ms(t.greedy).c_str(), ms(t.predict).c_str(),
      ms(t.exact).c_str(), exact_gap(t.exact_solution).c_str(), ms(t.validate).c_str(),
      t.valid ? "" : " INVALID", 100.0 * std::min(1.0, t.attributed(r.knobs.candidates) / total));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, only_small = false, only_big = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--model=7b48k") == 0) {
      only_small = true;
    } else if (std::strcmp(argv[i], "--model=30b96k") == 0) {
      only_big = true;
    } else {
      std::fprintf(stderr, "usage: bench_planner_grid [--quick] [--model=7b48k|30b96k]\n");
      return 2;
    }
  }
  std::vector<int64_t> seqs = {512, 1024, 2048, 4096, 8192}, pps = {4, 8, 16, 32};
  if (quick) {
    seqs = {512, 1024};
    pps = {4, 8};
  }
  for (bool big : {false, true}) {
    if ((big && only_small) || (!big && only_big)) continue;
    std::printf(
        "\nEPP planning latency, %s, github-like lengths, A800 preset, ulysses 8; phases timed "
        "once on the winning setting\n\n",
        big ? "Llama-30B 96K (memory binds)" : "Llama-7B 48K (memory does not bind)");
    std::printf(
        "| sequences | pp | whole plan | candidates | chunks | processor | grouping | schedule | "
        "ckpt problem + greedy | predict + memory | ckpt exact | validate | attributed |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    std::fflush(stdout);
    for (int64_t n : seqs)
      for (int64_t pp : pps) grid_point(n, pp, big);
  }
  return 0;
}
