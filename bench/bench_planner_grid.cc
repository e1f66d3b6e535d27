// Planner latency over batch size × pipeline degree (512 … 8192 sequences, pp 4 … 32), with the
// time of each phase of the EPP planner measured on the winning setting: sequence processor,
// pipeline grouping (Eq. 14), schedule, recompute problem + greedy solve, exact recompute solve,
// validation; and the whole plan's wall and CPU time and the process's peak RSS while planning.
// Llama-7B 48K and a 30B-class model at 96K (tests/common/paper_llama.h), GitHub-like lengths,
// A800 preset, Ulysses 8 inside a stage (as bench_planner). --cluster: a 1024-GPU cluster instead
// (the 30B-class model, sequences up to 1M tokens, pp 16 × dp 8 × Ulysses 8, global batch 4096):
// every replica's share. One run per point.
// Usage: bench_planner_grid [--quick] [--model=7b48k|30b96k] [--sequences=N] [--pp=P]
//                           [--threads=T] [--cluster]   (quick: 512, 1024 × pp 4, 8)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <string>
#include <vector>

#include "common/paper_llama.h"
#include "core/allocator_keep.h"
#include "core/config.h"
#include "cost/cost_model.h"
#include "data/lengths.h"
#include "obs/process_rss.h"
#include "plan/pipeline_grouping.h"
#include "plan/planner.h"
#include "plan/recompute.h"
#include "plan/recompute_search.h"
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

// CPU seconds of the whole process (every planner thread), which a loaded machine does not
// stretch the way it stretches wall-clock time.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// The 1024-GPU cluster: the 30B-class model of tests/common/paper_llama.h (hidden 6144, 48
// heads, so Ulysses 8 divides them; not the published 30B shape of examples/llama30b-96k.yaml)
// with sequences up to 1M tokens.
Config cluster_config() {
  Config cfg;
  cfg.model.num_layers = 60;
  cfg.model.hidden_size = 6144;
  cfg.model.num_attention_heads = 48;
  cfg.model.ffn_hidden_size = 16384;
  cfg.model.vocab_size = 32000;
  cfg.model.seq_length = 1 << 20;
  cfg.model.max_position_embeddings = 1 << 20;
  cfg.training.bf16 = true;
  cfg.training.global_batch_size = 4096;
  cfg.cluster.device = "a800-80gb";
  cfg.parallel.pipeline_parallel = 16;
  cfg.parallel.data_parallel = 8;
  cfg.parallel.ulysses_degree = 8;
  cfg.cluster.num_devices = 1024;
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
  // As the planner groups with adaptive recompute: the pipelines over budget charged the solve.
  plan::PipelineRecomputeGreedy solver(cfg, cm, r.plan.stages, r.plan.vpp, lengths, pr.chunks);
  const auto groups = plan::epp_group_pipelines_solved(pr.chunks, ipp, cm, first, act_budget,
                                                       solver.pipeline_recompute());
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
  // CPU time, what the solve's cap counts (a loaded machine stretches the wall-clock time).
  const double cpu0 = plan::thread_cpu_seconds();
  t.exact_solution = plan::recompute_solve_exact(pb);
  t.exact = plan::thread_cpu_seconds() - cpu0;

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

// How far the exact recompute solve is from its lower bound.
std::string exact_gap(const plan::RecomputeSolution& exact) {
  char gap[48];
  if (!exact.feasible)
    std::snprintf(gap, sizeof gap, "infeasible");
  else if (exact.cost <= 0)
    std::snprintf(gap, sizeof gap, "no recompute");
  else
    std::snprintf(gap, sizeof gap, "gap %.1f%%%s",
                  100.0 * (exact.cost - exact.lower_bound) / exact.cost,
                  exact.proven ? "" : ", above the 2% goal");
  return gap;
}

// One plan and its phases; `what` names the point in the first columns of its row.
void plan_point(const std::string& what, const Config& cfg, const cost::CostModel& cm,
                const std::vector<int64_t>& lengths, int32_t threads) {
  obs::rss_peak_reset();
  const auto t0 = Clock::now();
  const double cpu0 = process_cpu_seconds();
  plan::PlanResult r;
  try {
    r = plan::make_plan_detailed(cfg, cm, lengths, Schedule::epp, threads);
  } catch (const std::exception& e) {
    std::printf("| %s | failed: %s ||||||||||||||\n", what.c_str(), e.what());
    return;
  }
  const double total = since(t0), cpu = process_cpu_seconds() - cpu0;
  const int64_t rss = obs::rss_peak_bytes();
  const PhaseSeconds t = phases_time(cfg, cm, lengths, r);
  std::printf(
      "| %s | %s | %s | %s | %d | %zu (K=%d, %d pipeline%s) | %s | %s | %s | %s | %s | %s (%s) | "
      "%s%s | %.0f%% |\n",
      what.c_str(), ms(total).c_str(), ms(cpu).c_str(), mib(rss).c_str(), r.knobs.candidates,
      r.plan.chunks.size(), r.knobs.slices, r.knobs.pipelines, r.knobs.pipelines > 1 ? "s" : "",
      ms(t.processor).c_str(), ms(t.grouping).c_str(), ms(t.schedule).c_str(), ms(t.greedy).c_str(),
      ms(t.predict).c_str(), ms(t.exact).c_str(), exact_gap(t.exact_solution).c_str(),
      ms(t.validate).c_str(), t.valid ? "" : " INVALID",
      100.0 * std::min(1.0, t.attributed(r.knobs.candidates) / total));
  std::fflush(stdout);
}

void grid_point(int64_t n, int64_t pp, bool big, int32_t threads) {
  const Config cfg = testing::paper_llama(pp, big);
  const auto cm = cost::CostModel::from_config(cfg);
  const auto lengths = data::lengths_synthetic("github", n, cfg.model.seq_length, 1234);
  plan_point(std::to_string(n) + " | " + std::to_string(pp), cfg, cm, lengths, threads);
}

// Every replica of the 1024-GPU cluster: its share of the global batch, as `plan --replica`.
void cluster_points(int32_t threads) {
  const Config cfg = cluster_config();
  const auto cm = cost::CostModel::from_config(cfg);
  const auto batch =
      data::lengths_synthetic("github", cfg.training.global_batch_size, cfg.model.seq_length, 1234);
  const auto shares = plan::balance_replicas(batch, cfg.parallel.data_parallel, cm, cfg);
  for (size_t r = 0; r < shares.size(); ++r) {
    int64_t longest = 0;
    for (int64_t l : shares[r]) longest = std::max(longest, l);
    plan_point(std::to_string(r) + " | " + std::to_string(shares[r].size()) + " (longest " +
                   std::to_string(longest) + ")",
               cfg, cm, shares[r], threads);
  }
}

const char* kColumns =
    "whole plan | CPU | peak RSS | candidates | chunks | processor | grouping | schedule | "
    "recompute problem + greedy | predict + memory | recompute exact (CPU) | validate | attributed "
    "|\n";
const char* kAlign =
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";

}  // namespace

int main(int argc, char** argv) {
  infinipipe::allocator_keep_freed_memory();  // as the infinipipe command's main
  infinipipe::allocator_huge_pages(size_t{256} << 20);
  bool quick = false, only_small = false, only_big = false, cluster = false;
  int64_t one_n = 0, one_pp = 0;
  int32_t threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--model=7b48k") {
      only_small = true;
    } else if (a == "--model=30b96k") {
      only_big = true;
    } else if (a == "--cluster") {
      cluster = true;
    } else if (a.rfind("--sequences=", 0) == 0) {
      one_n = std::stoll(a.substr(12));
    } else if (a.rfind("--pp=", 0) == 0) {
      one_pp = std::stoll(a.substr(5));
    } else if (a.rfind("--threads=", 0) == 0) {
      threads = std::stoi(a.substr(10));
    } else {
      std::fprintf(stderr,
                   "usage: bench_planner_grid [--quick] [--model=7b48k|30b96k] [--sequences=N] "
                   "[--pp=P] [--threads=T] [--cluster]\n");
      return 2;
    }
  }
  if (cluster) {
    std::printf(
        "\nEPP planning latency per replica, 1024 GPUs: Llama-30B, sequences up to 1M tokens "
        "(github-like), pp 16 x dp 8 x ulysses 8, global batch 4096, A800 preset, %d planner "
        "thread%s; phases timed once on the winning setting\n\n",
        threads, threads == 1 ? "" : "s");
    std::printf("| replica | sequences | %s", kColumns);
    std::printf("%s", kAlign);
    cluster_points(threads);
    return 0;
  }
  std::vector<int64_t> seqs = {512, 1024, 2048, 4096, 8192}, pps = {4, 8, 16, 32};
  if (quick) {
    seqs = {512, 1024};
    pps = {4, 8};
  }
  if (one_n > 0) seqs = {one_n};
  if (one_pp > 0) pps = {one_pp};
  for (bool big : {false, true}) {
    if ((big && only_small) || (!big && only_big)) continue;
    std::printf(
        "\nEPP planning latency, %s, github-like lengths, A800 preset, ulysses 8, %d planner "
        "thread%s; phases timed once on the winning setting\n\n",
        big ? "Llama-30B 96K (memory binds)" : "Llama-7B 48K (memory does not bind)", threads,
        threads == 1 ? "" : "s");
    std::printf("| sequences | pp | %s", kColumns);
    std::printf("%s", kAlign);
    std::fflush(stdout);
    for (int64_t n : seqs)
      for (int64_t pp : pps) grid_point(n, pp, big, threads);
  }
  return 0;
}
